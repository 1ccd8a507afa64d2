//! The double's kube-scheduler filters, the admission plugin GKE enables for extended
//! resources, and the kubelet's own admission of a pod bound by `nodeName`.
//!
//! Each rule names the Kubernetes source it follows (github.com/kubernetes/kubernetes,
//! release-1.33, unless said otherwise).

use serde_json::{json, Value};
use std::collections::BTreeMap;

pub const GPU: &str = "nvidia.com/gpu";

/// Why a node does not take a pod, in kube-scheduler's words (each plugin's
/// `ErrReason*`), one per node: the first filter that fails, in the default profile's
/// order (pkg/scheduler/apis/config/v1/default_plugins.go: TaintToleration,
/// NodeAffinity, NodeResourcesFit, ..., InterPodAffinity).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unfit {
    /// pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go:
    /// "node(s) had untolerated taint {key: value}".
    Taint(String, String),
    /// pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go, ErrReasonPod.
    Affinity,
    /// pkg/scheduler/framework/plugins/noderesources/fit.go: "Insufficient <resource>".
    Gpu,
    /// pkg/scheduler/framework/plugins/interpodaffinity/filtering.go,
    /// ErrReasonAntiAffinityRulesNotMatch.
    AntiAffinity,
    /// cluster-autoscaler: the node group is at its maximum size
    /// (cluster-autoscaler/core/scaleup/orchestrator/orchestrator.go, "max node group size reached").
    MaxSize,
}

impl Unfit {
    pub fn text(&self) -> String {
        match self {
            Unfit::Taint(k, v) => format!("node(s) had untolerated taint {{{k}: {v}}}"),
            Unfit::Affinity => "node(s) didn't match Pod's node affinity/selector".into(),
            Unfit::Gpu => format!("Insufficient {GPU}"),
            Unfit::AntiAffinity => "node(s) didn't match pod anti-affinity rules".into(),
            Unfit::MaxSize => "max node group size reached".into(),
        }
    }
}

/// The "0/N nodes are available: ..." message of a FitError
/// (pkg/scheduler/framework/types.go, FitError.Error: counts per reason, sorted).
/// With no node at all, schedule_one.go's ErrNoNodesAvailable.
pub fn fit_error(nodes: usize, why: &[Unfit]) -> String {
    if nodes == 0 {
        return "no nodes available to schedule pods".into();
    }
    format!("0/{nodes} nodes are available: {}.", summary(why))
}

/// "2 node(s) ..., 1 Insufficient ..." (reasons counted and sorted by their text).
pub fn summary(why: &[Unfit]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for w in why {
        *counts.entry(w.text()).or_default() += 1;
    }
    let mut parts: Vec<String> = counts.iter().map(|(t, n)| format!("{n} {t}")).collect();
    parts.sort();
    parts.join(", ")
}

/// A quantity as the API may send one (string or number), for whole-unit resources.
fn quantity(v: &Value) -> u64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| v.as_u64())
        .unwrap_or(0)
}

/// One container's request for `res`: its requests, else its limits (the API server
/// defaults an extended resource's request to its limit: pkg/apis/core/v1/defaults.go,
/// SetDefaults_Container).
fn container_request(c: &Value, res: &str) -> u64 {
    let r = &c["resources"]["requests"][res];
    if r.is_null() {
        quantity(&c["resources"]["limits"][res])
    } else {
        quantity(r)
    }
}

/// The pod's effective request for `res`: the larger of its main containers plus its
/// sidecars (init containers with `restartPolicy: Always`) and its largest plain init
/// container plus the sidecars started before it (k8s.io/component-helpers/resource/helpers.go,
/// PodRequests).
pub fn pod_request(pod: &Value, res: &str) -> u64 {
    let main: u64 = containers(pod, "containers")
        .map(|c| container_request(c, res))
        .sum();
    let mut sidecars = 0;
    let mut init_max = 0;
    for c in containers(pod, "initContainers") {
        if c["restartPolicy"] == "Always" {
            sidecars += container_request(c, res);
        } else {
            init_max = init_max.max(sidecars + container_request(c, res));
        }
    }
    (main + sidecars).max(init_max)
}

pub fn containers<'a>(pod: &'a Value, which: &str) -> impl Iterator<Item = &'a Value> {
    pod["spec"][which].as_array().into_iter().flatten()
}

/// GKE enables the ExtendedResourceToleration admission plugin
/// (plugin/pkg/admission/extendedresourcetoleration/admission.go): a pod requesting an
/// extended resource (any container's requests or limits) gets the toleration
/// `{key: <resource>, operator: Exists, effect: NoSchedule}`, which tolerates GKE's
/// `nvidia.com/gpu=present:NoSchedule` on GPU nodes.
pub fn extended_resource_toleration(pod: &mut Value) {
    let asks = ["containers", "initContainers"].iter().any(|w| {
        containers(pod, w)
            .any(|c| !c["resources"]["requests"][GPU].is_null() || !c["resources"]["limits"][GPU].is_null())
    });
    if !asks {
        return;
    }
    let t = json!({"key": GPU, "operator": "Exists", "effect": "NoSchedule"});
    if !pod["spec"]["tolerations"].is_array() {
        pod["spec"]["tolerations"] = json!([]);
    }
    let list = pod["spec"]["tolerations"].as_array_mut().unwrap();
    if !list.contains(&t) {
        list.push(t);
    }
}

/// Whether toleration `t` tolerates taint `taint` (staging/src/k8s.io/api/core/v1/toleration.go,
/// ToleratesTaint): an empty effect matches every effect; an empty key with `Exists`
/// matches every key; `Exists` ignores the value; `Equal` (the default) compares it.
fn tolerates(t: &Value, taint: &Value) -> bool {
    let effect = t["effect"].as_str().unwrap_or("");
    if !effect.is_empty() && effect != taint["effect"].as_str().unwrap_or("") {
        return false;
    }
    let key = t["key"].as_str().unwrap_or("");
    let op = t["operator"].as_str().unwrap_or("Equal");
    if key.is_empty() {
        return op == "Exists";
    }
    if key != taint["key"].as_str().unwrap_or("") {
        return false;
    }
    match op {
        "Exists" => true,
        "Equal" | "" => t["value"].as_str().unwrap_or("") == taint["value"].as_str().unwrap_or(""),
        _ => false,
    }
}

/// The first taint of `effects` on `node` that the pod does not tolerate
/// (tainttoleration/taint_toleration.go filters NoSchedule and NoExecute; the kubelet
/// only NoExecute: pkg/kubelet/lifecycle/predicate.go).
pub fn untolerated(pod: &Value, node: &Value, effects: &[&str]) -> Option<(String, String)> {
    let tols: Vec<&Value> = pod["spec"]["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| effects.contains(&t["effect"].as_str().unwrap_or("")))
        .find(|taint| !tols.iter().any(|t| tolerates(t, taint)))
        .map(|t| {
            (
                t["key"].as_str().unwrap_or("").to_string(),
                t["value"].as_str().unwrap_or("").to_string(),
            )
        })
}

/// One `matchExpressions` requirement against `labels`
/// (staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go,
/// through apimachinery/pkg/labels/selector.go Requirement.Matches): In, NotIn (also
/// true when the key is absent), Exists, DoesNotExist, Gt and Lt (one integer value,
/// compared with the label's integer value; a label that is no integer never matches).
fn requirement(e: &Value, labels: &Value) -> bool {
    let key = e["key"].as_str().unwrap_or("");
    let vals: Vec<&str> = e["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let have = labels[key].as_str();
    let int = |s: &str| s.parse::<i64>().ok();
    match e["operator"].as_str().unwrap_or("") {
        "In" => have.is_some_and(|h| vals.contains(&h)),
        "NotIn" => have.is_none_or(|h| !vals.contains(&h)),
        "Exists" => have.is_some(),
        "DoesNotExist" => have.is_none(),
        "Gt" | "Lt" => {
            let (Some(h), [v]) = (have.and_then(int), vals.as_slice()) else {
                return false;
            };
            let Some(v) = int(v) else { return false };
            if e["operator"] == "Gt" {
                h > v
            } else {
                h < v
            }
        }
        _ => false,
    }
}

/// Whether `node` passes the pod's `nodeSelector` and required node affinity
/// (pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go through
/// nodeaffinity.GetRequiredNodeAffinity: every nodeSelector pair, and at least one
/// nodeSelectorTerm whose matchExpressions on labels and matchFields on
/// `metadata.name` all hold; an empty term list matches nothing, an empty term nothing).
pub fn node_affinity(pod: &Value, node: &Value) -> bool {
    let labels = &node["metadata"]["labels"];
    let sel_ok = pod["spec"]["nodeSelector"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| labels[k] == *v);
    if !sel_ok {
        return false;
    }
    let req = &pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    if req.is_null() {
        return true;
    }
    let fields = json!({"metadata.name": node["metadata"]["name"]});
    req["nodeSelectorTerms"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|term| {
            let exprs = term["matchExpressions"].as_array().cloned().unwrap_or_default();
            let fexprs = term["matchFields"].as_array().cloned().unwrap_or_default();
            (!exprs.is_empty() || !fexprs.is_empty())
                && exprs.iter().all(|e| requirement(e, labels))
                && fexprs.iter().all(|e| requirement(e, &fields))
        })
}

/// Whether `pod`'s labels match a label selector (matchLabels and matchExpressions).
fn selector_matches(sel: &Value, pod: &Value) -> bool {
    let labels = &pod["metadata"]["labels"];
    sel["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| labels[k] == *v)
        && sel["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|e| requirement(e, labels))
}

/// Required pod anti-affinity of the incoming pod
/// (pkg/scheduler/framework/plugins/interpodaffinity/filtering.go,
/// satisfyPodAntiAffinity): no term may match a pod (of the pod's namespace, or the
/// term's `namespaces`) on a node that shares the term's topology value with `node`.
pub fn anti_affinity_ok(pod: &Value, node: &Value, nodes: &[Value], bound: &[&Value]) -> bool {
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or("default");
    pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|term| {
            let key = term["topologyKey"].as_str().unwrap_or("");
            let Some(value) = node["metadata"]["labels"][key].as_str() else {
                return true;
            };
            let spaces: Vec<&str> = term["namespaces"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            !bound.iter().any(|p| {
                let pns = p["metadata"]["namespace"].as_str().unwrap_or("default");
                let in_ns = if spaces.is_empty() {
                    pns == ns
                } else {
                    spaces.contains(&pns)
                };
                let on = nodes
                    .iter()
                    .find(|n| n["metadata"]["name"] == p["spec"]["nodeName"])
                    .and_then(|n| n["metadata"]["labels"][key].as_str());
                in_ns && on == Some(value) && selector_matches(&term["labelSelector"], p)
            })
        })
}

/// The GPUs a node can give: allocatable minus what its non-terminal pods request
/// (noderesources/fit.go, fitsRequest).
pub fn free_gpus(node: &Value, bound: &[&Value]) -> u64 {
    quantity(&node["status"]["allocatable"][GPU]).saturating_sub(used_gpus(node, bound))
}

pub fn used_gpus(node: &Value, bound: &[&Value]) -> u64 {
    bound
        .iter()
        .filter(|p| p["spec"]["nodeName"] == node["metadata"]["name"])
        .map(|p| pod_request(p, GPU))
        .sum()
}

/// Run the filters for `pod` on `node` (`bound`: every non-terminal pod bound anywhere).
pub fn filter(pod: &Value, node: &Value, nodes: &[Value], bound: &[&Value]) -> Result<(), Unfit> {
    if let Some((k, v)) = untolerated(pod, node, &["NoSchedule", "NoExecute"]) {
        return Err(Unfit::Taint(k, v));
    }
    if !node_affinity(pod, node) {
        return Err(Unfit::Affinity);
    }
    if pod_request(pod, GPU) > free_gpus(node, bound) {
        return Err(Unfit::Gpu);
    }
    if !anti_affinity_ok(pod, node, nodes, bound) {
        return Err(Unfit::AntiAffinity);
    }
    Ok(())
}

/// The kubelet's admission of a pod bound to its node (pkg/kubelet/lifecycle/predicate.go,
/// generalFilter and rejectPodAdmissionBasedOnOSSelector): a pod whose `nodeName`
/// bypassed the scheduler is still refused when its GPUs do not fit ("OutOf<resource>",
/// pod Failed), when the node does not match its node selector/affinity ("NodeAffinity"),
/// or when it does not tolerate a NoExecute taint ("Taint").
pub fn kubelet_admit(pod: &Value, node: &Value, bound: &[&Value]) -> Result<(), (String, String)> {
    let want = pod_request(pod, GPU);
    let cap = quantity(&node["status"]["allocatable"][GPU]);
    let used = used_gpus(node, bound);
    if want > cap.saturating_sub(used) {
        return Err((
            format!("OutOf{GPU}"),
            format!(
                "Pod was rejected: Node didn't have enough resource: {GPU}, requested: {want}, used: {used}, capacity: {cap}"
            ),
        ));
    }
    if !node_affinity(pod, node) {
        return Err((
            "NodeAffinity".into(),
            "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
                .into(),
        ));
    }
    if let Some((k, v)) = untolerated(pod, node, &["NoExecute"]) {
        return Err((
            "Taint".into(),
            format!("Pod was rejected: Predicate TaintToleration failed: node(s) had untolerated taint {{{k}: {v}}}"),
        ));
    }
    Ok(())
}
