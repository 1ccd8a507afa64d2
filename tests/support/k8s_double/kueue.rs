//! Kueue (github.com/kubernetes-sigs/kueue) for JobSets: its webhook suspends a queued
//! JobSet, a Workload waits for quota, then, on a queue with the DWS provisioning
//! admission check, for a ProvisioningRequest GKE's autoscaler provisions
//! (autoscaler.rs), and only then is admitted and the JobSet resumed.

use super::autoscaler::CONSUME;
use super::{rand5, start_jobset, ts, Shared, State};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

/// The admission check's name on queues with one (`Options::queues`' flag).
pub const CHECK: &str = "dws-prov";
/// GKE's provisioning class for queued provisioning (GKE docs how-to/provisioningrequest).
pub const CLASS: &str = "queued-provisioning.gke.io";
/// Kueue passes a job's annotations with this prefix to its ProvisioningRequest's
/// parameters (kueue pkg/controller/admissionchecks/provisioning/controller.go,
/// parametersKueueAnnotationsPrefix via pkg/util/admissioncheck).
pub const PARAM_PREFIX: &str = "provreq.kueue.x-k8s.io/";

/// A queued JobSet is created: Kueue's JobSet webhook suspends it
/// (kueue pkg/controller/jobs/jobset/jobset_webhook.go, Default -> jobframework
/// ApplyDefaultForSuspend) and its reconciler makes a Workload with a pod set per
/// replicated job, `count` = replicas x parallelism pods
/// (pkg/controller/jobs/jobset/jobset_controller.go, PodSets).
pub(super) fn on_create(s: &Shared, st: &mut State, js: &mut Value, q: &str) {
    let ns = js["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let name = js["metadata"]["name"].as_str().unwrap_or("").to_string();
    js["spec"]["suspend"] = true.into();
    js["status"]["conditions"] = json!([{"type": "Suspended", "status": "True", "reason": "SuspendedJobs", "lastTransitionTime": ts()}]);
    let prov = s.opts.queues.iter().find(|(n, _)| n == q).map(|(_, p)| *p);
    let pod_sets: Vec<Value> = js["spec"]["replicatedJobs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|rj| {
            let reps = rj["replicas"].as_u64().unwrap_or(1);
            let par = rj["template"]["spec"]["parallelism"].as_u64().unwrap_or(1);
            json!({"name": rj["name"], "count": reps * par, "template": rj["template"]["spec"]["template"]})
        })
        .collect();
    let gpus: u64 = pod_sets
        .iter()
        .map(|p| {
            let pod = json!({"spec": p["template"]["spec"]});
            p["count"].as_u64().unwrap_or(0) * super::sched::pod_request(&pod, super::sched::GPU)
        })
        .sum();
    let wl = format!("jobset-{name}-{}", rand5());
    let t = ts();
    let annotations: serde_json::Map<String, Value> = js["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(PARAM_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut w = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": wl, "namespace": ns, "creationTimestamp": t, "labels": {"kueue.x-k8s.io/job-uid": js["metadata"]["uid"]},
                     "annotations": annotations,
                     "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": name, "uid": js["metadata"]["uid"], "controller": true}]},
        "spec": {"queueName": q, "podSets": pod_sets, "active": true},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
            "message": format!("couldn't assign flavors to pod set workers: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, {gpus} more needed"), "lastTransitionTime": t}]}});
    match prov {
        None => {
            w["status"]["conditions"][0]["reason"] = "Inadmissible".into();
            w["status"]["conditions"][0]["message"] = format!("LocalQueue {q} doesn't exist").into();
        }
        Some(true) => {
            w["status"]["admissionChecks"] =
                json!([{"name": CHECK, "state": "Pending", "message": "", "lastTransitionTime": t}]);
        }
        Some(false) => {}
    }
    st.autoscaler
        .workload_seen
        .insert((ns.clone(), wl.clone()), Instant::now());
    st.workloads.insert((ns, wl), w);
}

fn cond(v: &Value, t: &str) -> bool {
    v["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == t && c["status"] == "True")
}

fn cond_message(v: &Value, t: &str) -> String {
    v["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == t)
        .and_then(|c| c["message"].as_str())
        .unwrap_or("")
        .to_string()
}

/// Kueue's controllers, one step:
/// * after `admit_after` the Workload gets quota (QuotaReserved); without admission
///   checks it is Admitted at once (pkg/workload/admissionchecks.go);
/// * with the provisioning check, Kueue's provisioning controller
///   (pkg/controller/admissionchecks/provisioning/controller.go) makes a PodTemplate per
///   pod set (`ppt-<request>-<podset>`) and a ProvisioningRequest `<workload>-<check>-1` of
///   class `queued-provisioning.gke.io` with the job's `provreq.kueue.x-k8s.io/*`
///   annotations as parameters; Provisioned=True turns the check Ready (with
///   podSetUpdates annotating the pods with the request to consume), Failed turns it
///   Rejected (the workload deactivated), BookingExpired before admission Retry;
/// * all checks Ready: Admitted, and the JobSet is resumed with the podSetUpdates
///   applied (pkg/controller/jobframework/reconciler.go, startJob).
pub(super) fn tick(s: &Arc<Shared>) {
    let mut resume = vec![];
    {
        let mut st = s.state.lock().unwrap();
        let keys: Vec<(String, String)> = st.workloads.keys().cloned().collect();
        for key in keys {
            let w = st.workloads[&key].clone();
            let q = w["spec"]["queueName"].as_str().unwrap_or("").to_string();
            let Some(prov) = s.opts.queues.iter().find(|(n, _)| *n == q).map(|(_, p)| *p) else {
                continue;
            };
            if cond(&w, "Admitted") || cond(&w, "Finished") || w["spec"]["active"] == false {
                continue;
            }
            let t = ts();
            if !cond(&w, "QuotaReserved") {
                let seen = st.autoscaler.workload_seen.get(&key).copied();
                if seen.is_none_or(|at| at.elapsed() < s.opts.admit_after) {
                    continue;
                }
                let w = st.workloads.get_mut(&key).unwrap();
                w["status"]["conditions"] = json!([{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                    "message": format!("Quota reserved in ClusterQueue cq-{q}"), "lastTransitionTime": t}]);
                w["status"]["admission"] = json!({"clusterQueue": format!("cq-{q}"), "podSetAssignments":
                    w["spec"]["podSets"].as_array().into_iter().flatten().map(|p| json!({"name": p["name"], "flavors": {"nvidia.com/gpu": "default-flavor"}, "count": p["count"]})).collect::<Vec<_>>()});
                if prov {
                    make_provreq(&mut st, &key);
                } else if let Some(js) = admit(&mut st, &key, None) {
                    resume.push(js);
                }
                continue;
            }
            if !prov {
                continue;
            }
            let pr_name = format!("{}-{CHECK}-1", key.1);
            let Some(pr) = st.provreqs.get(&(key.0.clone(), pr_name.clone())).cloned() else {
                continue;
            };
            let updates: Vec<Value> = w["spec"]["podSets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    json!({"name": p["name"],
                "annotations": {CONSUME: pr_name, "autoscaling.x-k8s.io/provisioning-class-name": CLASS}})
                })
                .collect();
            let mut check = w["status"]["admissionChecks"][0].clone();
            let mut deactivate = false;
            let mut admitted = false;
            if cond(&pr, "Failed") {
                check["state"] = "Rejected".into();
                check["message"] = cond_message(&pr, "Failed").into();
                deactivate = true;
            } else if cond(&pr, "BookingExpired") {
                check["state"] = "Retry".into();
                check["message"] = cond_message(&pr, "BookingExpired").into();
            } else if cond(&pr, "Provisioned") {
                check["state"] = "Ready".into();
                check["message"] = "Provisioning Request was successfully provisioned.".into();
                check["podSetUpdates"] = updates.into();
                admitted = true;
            } else {
                let msg = if cond(&pr, "Accepted") {
                    cond_message(&pr, "Provisioned")
                } else {
                    String::new()
                };
                check["message"] = if msg.is_empty() {
                    "Waiting for resources. Currently there are not enough resources available to fulfill the request.".into()
                } else {
                    msg.into()
                };
            }
            check["lastTransitionTime"] = t.clone().into();
            let w = st.workloads.get_mut(&key).unwrap();
            w["status"]["admissionChecks"][0] = check;
            if deactivate {
                w["spec"]["active"] = false.into();
                w["status"]["conditions"].as_array_mut().unwrap().push(json!({"type": "Evicted", "status": "True", "reason": "Deactivated",
                    "message": format!("The workload is deactivated due to rejected admission check {CHECK}"), "lastTransitionTime": t}));
            }
            if admitted {
                if let Some(js) = admit(&mut st, &key, Some(&pr_name)) {
                    resume.push(js);
                }
            }
        }
    }
    for (ns, name) in resume {
        start_jobset(s, &ns, &name);
    }
}

fn make_provreq(st: &mut State, key: &(String, String)) {
    let w = st.workloads[key].clone();
    let pr = format!("{}-{CHECK}-1", key.1);
    let t = ts();
    let mut pod_sets = vec![];
    for p in w["spec"]["podSets"].as_array().into_iter().flatten() {
        let ppt = format!("ppt-{pr}-{}", p["name"].as_str().unwrap_or(""));
        st.pod_templates.insert(
            (key.0.clone(), ppt.clone()),
            json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": ppt, "namespace": key.0},
                   "template": p["template"]}),
        );
        pod_sets.push(json!({"podTemplateRef": {"name": ppt}, "count": p["count"]}));
    }
    let params: serde_json::Map<String, Value> = w["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| k.strip_prefix(PARAM_PREFIX).map(|k| (k.to_string(), v.clone())))
        .collect();
    st.rv += 1;
    st.provreqs.insert(
        (key.0.clone(), pr.clone()),
        json!({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": pr, "namespace": key.0, "creationTimestamp": t, "resourceVersion": st.rv.to_string(),
                "ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": key.1, "controller": true}]},
            "spec": {"provisioningClassName": CLASS, "podSets": pod_sets, "parameters": params},
            "status": {"conditions": []}}),
    );
    if let Some(c) = st
        .workloads
        .get_mut(key)
        .and_then(|w| w["status"]["admissionChecks"].get_mut(0))
    {
        c["message"] = "Waiting for resources. Currently there are not enough resources available to fulfill the request.".into();
    }
}

/// The workload is Admitted; its JobSet unsuspended with the check's pod annotations.
/// Returns the JobSet to start.
fn admit(st: &mut State, key: &(String, String), provreq: Option<&str>) -> Option<(String, String)> {
    let t = ts();
    let w = st.workloads.get_mut(key)?;
    w["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "Admitted", "status": "True", "reason": "Admitted",
        "message": "The workload is admitted", "lastTransitionTime": t}));
    let js_name = w["metadata"]["ownerReferences"][0]["name"].as_str()?.to_string();
    let js = st.jobsets.get_mut(&(key.0.clone(), js_name.clone()))?;
    js["spec"]["suspend"] = false.into();
    js["status"]["conditions"] =
        json!([{"type": "Suspended", "status": "False", "reason": "ResumeJobs", "lastTransitionTime": t}]);
    if let Some(pr) = provreq {
        for rj in js["spec"]["replicatedJobs"].as_array_mut().into_iter().flatten() {
            let meta = &mut rj["template"]["spec"]["template"]["metadata"];
            if !meta["annotations"].is_object() {
                meta["annotations"] = json!({});
            }
            meta["annotations"][CONSUME] = pr.into();
            meta["annotations"]["autoscaling.x-k8s.io/provisioning-class-name"] = CLASS.into();
        }
    }
    Some((key.0.clone(), js_name))
}

/// Routes for the objects this module and the autoscaler keep: ProvisioningRequests
/// (autoscaling.x-k8s.io/v1) and PodTemplates, read, and created as a user may create
/// them without Kueue (GKE docs how-to/provisioningrequest, "without Kueue").
pub(super) fn route(st: &mut State, m: &str, segs: &[&str], body: &[u8]) -> Option<(u16, Value)> {
    if m == "POST" {
        return create(st, segs, body);
    }
    if m != "GET" {
        return None;
    }
    let list = |kind: &str, items: Vec<Value>| json!({"kind": kind, "apiVersion": "autoscaling.x-k8s.io/v1", "metadata": {"resourceVersion": st.rv.to_string()}, "items": items});
    match segs {
        ["apis", "autoscaling.x-k8s.io", "v1"] => Some((
            200,
            super::resource_list(
                "autoscaling.x-k8s.io/v1",
                &[(
                    "provisioningrequests",
                    "ProvisioningRequest",
                    true,
                    &["provreq", "provreqs"],
                )],
            ),
        )),
        ["apis", "autoscaling.x-k8s.io", "v1", "provisioningrequests"] => Some((
            200,
            list("ProvisioningRequestList", st.provreqs.values().cloned().collect()),
        )),
        ["apis", "autoscaling.x-k8s.io", "v1", "namespaces", ns, "provisioningrequests"] => Some((
            200,
            list(
                "ProvisioningRequestList",
                st.provreqs
                    .iter()
                    .filter(|((n, _), _)| n == ns)
                    .map(|(_, v)| v.clone())
                    .collect(),
            ),
        )),
        ["apis", "autoscaling.x-k8s.io", "v1", "namespaces", ns, "provisioningrequests", name] => {
            Some(match st.provreqs.get(&(ns.to_string(), name.to_string())) {
                Some(v) => (200, v.clone()),
                None => super::status(
                    404,
                    "NotFound",
                    &format!("provisioningrequests.autoscaling.x-k8s.io \"{name}\" not found"),
                ),
            })
        }
        ["api", "v1", "namespaces", ns, "podtemplates", name] => {
            Some(match st.pod_templates.get(&(ns.to_string(), name.to_string())) {
                Some(v) => (200, v.clone()),
                None => super::status(404, "NotFound", &format!("podtemplates \"{name}\" not found")),
            })
        }
        _ => None,
    }
}

fn create(st: &mut State, segs: &[&str], body: &[u8]) -> Option<(u16, Value)> {
    let (ns, kind) = match segs {
        ["apis", "autoscaling.x-k8s.io", "v1", "namespaces", ns, "provisioningrequests"] => (*ns, "provreq"),
        ["api", "v1", "namespaces", ns, "podtemplates"] => (*ns, "podtemplate"),
        _ => return None,
    };
    let mut v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return Some(super::status(400, "BadRequest", &e.to_string())),
    };
    let Some(name) = v["metadata"]["name"].as_str().map(String::from) else {
        return Some(super::status(422, "Invalid", "metadata.name: Required value"));
    };
    let key = (ns.to_string(), name.clone());
    st.rv += 1;
    v["metadata"]["namespace"] = ns.into();
    v["metadata"]["creationTimestamp"] = ts().into();
    v["metadata"]["resourceVersion"] = st.rv.to_string().into();
    let map = if kind == "provreq" {
        v["status"] = json!({"conditions": []});
        &mut st.provreqs
    } else {
        &mut st.pod_templates
    };
    if map.contains_key(&key) {
        return Some(super::status(
            409,
            "AlreadyExists",
            &format!("{name} already exists"),
        ));
    }
    map.insert(key, v.clone());
    Some((201, v))
}
