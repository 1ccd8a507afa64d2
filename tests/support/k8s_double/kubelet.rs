//! Pods: admission, scheduling (kube-scheduler's filters, sched.rs), the kubelet's
//! admission and its running of every container as a local process group: plain init
//! containers in order, native sidecars, then all main containers, logs per container.

use super::sched::{self, Unfit};
use super::{devices, now_rfc3339, rand5, settle_jobsets, status, ts, Ctr, PodRec, Shared, State};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The non-terminal pods bound to a node (what the scheduler and kubelet count).
pub(super) fn bound(st: &State) -> Vec<&Value> {
    st.pods
        .values()
        .map(|p| &p.obj)
        .filter(|p| p["spec"]["nodeName"].as_str().is_some_and(|n| !n.is_empty()))
        .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
        .collect()
}

/// kube-scheduler's choice for `pod`: the first node passing every filter, or each
/// node's reason (pkg/scheduler/schedule_one.go, findNodesThatFitPod).
pub(super) fn schedule(st: &State, pod: &Value) -> Result<String, Vec<Unfit>> {
    let b = bound(st);
    let mut why = vec![];
    for n in &st.nodes {
        match sched::filter(pod, n, &st.nodes, &b) {
            Ok(()) => return Ok(n["metadata"]["name"].as_str().unwrap_or("").to_string()),
            Err(u) => why.push(u),
        }
    }
    Err(why)
}

/// Record an event (core/v1 Event) about `obj`, or bump the count of the same one.
pub(super) fn event(st: &mut State, obj: &Value, kind: &str, reason: &str, message: &str, component: &str) {
    let ns = obj["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
    let t = ts();
    if let Some(e) = st.events.iter_mut().find(|e| {
        e["involvedObject"]["name"] == name.as_str()
            && e["involvedObject"]["namespace"] == ns.as_str()
            && e["reason"] == reason
            && e["message"] == message
    }) {
        e["count"] = (e["count"].as_u64().unwrap_or(1) + 1).into();
        e["lastTimestamp"] = t.into();
        return;
    }
    st.rv += 1;
    st.events.push(json!({
        "kind": "Event", "apiVersion": "v1",
        "metadata": {"name": format!("{name}.{:x}", st.rv), "namespace": ns, "resourceVersion": st.rv.to_string(), "creationTimestamp": t},
        "involvedObject": {"kind": obj["kind"].as_str().unwrap_or("Pod"), "apiVersion": "v1", "name": name, "namespace": ns, "uid": obj["metadata"]["uid"]},
        "reason": reason, "message": message, "type": kind,
        "source": {"component": component}, "reportingComponent": component,
        "firstTimestamp": t, "lastTimestamp": t, "count": 1
    }));
}

/// A pod left Pending by the scheduler: PodScheduled=False, Unschedulable, and a
/// FailedScheduling event with the per-node reasons.
fn unschedulable(st: &mut State, pod: &mut Value, why: &[Unfit]) {
    let msg = sched::fit_error(st.nodes.len(), why);
    pod["status"] = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
        "reason": "Unschedulable", "message": msg, "lastTransitionTime": ts()}]});
    event(st, pod, "Warning", "FailedScheduling", &msg, "default-scheduler");
}

/// Admit, schedule, store and start a pod.
pub(super) fn create_pod(s: &Arc<Shared>, mut pod: Value) -> (u16, Value) {
    let ns = pod["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    if pod["metadata"]["name"].as_str().is_none_or(str::is_empty) {
        let g = pod["metadata"]["generateName"]
            .as_str()
            .unwrap_or("pod-")
            .to_string();
        pod["metadata"]["name"] = format!("{g}{}", rand5()).into();
    }
    pod["kind"] = "Pod".into();
    pod["apiVersion"] = "v1".into();
    let name = pod["metadata"]["name"].as_str().unwrap().to_string();
    sched::extended_resource_toleration(&mut pod);
    let mut st = s.state.lock().unwrap();
    if st.pods.contains_key(&(ns.clone(), name.clone())) {
        return status(409, "AlreadyExists", &format!("pods \"{name}\" already exists"));
    }
    st.rv += 1;
    pod["metadata"]["uid"] = format!("uid-{name}-{}", st.rv).into();
    pod["metadata"]["resourceVersion"] = st.rv.to_string().into();
    pod["metadata"]["creationTimestamp"] = ts().into();
    let dir = s.dir.join(format!("pod-{ns}-{name}"));
    if pod["spec"]["nodeName"].as_str().is_none_or(str::is_empty) {
        match schedule(&st, &pod) {
            Ok(n) => pod["spec"]["nodeName"] = n.into(),
            Err(why) => {
                unschedulable(&mut st, &mut pod, &why);
                let obj = pod.clone();
                st.pods.insert((ns, name), PodRec::new(pod, dir));
                return (201, obj);
            }
        }
    } else if !st
        .nodes
        .iter()
        .any(|n| n["metadata"]["name"] == pod["spec"]["nodeName"])
    {
        return status(422, "Invalid", "spec.nodeName: no such node");
    }
    st.pods.insert((ns.clone(), name.clone()), PodRec::new(pod, dir));
    let obj = bind(s, &mut st, &ns, &name);
    drop(st);
    settle_jobsets(s);
    (201, obj)
}

/// Retry the pending pods (kube-scheduler's queue), as nodes come and pods end.
pub(super) fn schedule_pending(s: &Arc<Shared>) {
    let mut st = s.state.lock().unwrap();
    let pending: Vec<(String, String)> = st
        .pods
        .iter()
        .filter(|(_, p)| p.obj["spec"]["nodeName"].as_str().is_none_or(str::is_empty))
        .map(|(k, _)| k.clone())
        .collect();
    for key in pending {
        let pod = st.pods[&key].obj.clone();
        match schedule(&st, &pod) {
            Ok(n) => {
                st.pods.get_mut(&key).unwrap().obj["spec"]["nodeName"] = n.into();
                bind(s, &mut st, &key.0, &key.1);
            }
            Err(why) => {
                let msg = sched::fit_error(st.nodes.len(), &why);
                let mut p = pod;
                if p["status"]["conditions"][0]["message"] != msg.as_str() {
                    unschedulable(&mut st, &mut p, &why);
                    st.pods.get_mut(&key).unwrap().obj["status"] = p["status"].clone();
                }
            }
        }
    }
}

fn container_status(c: &Value, state: Value, ready: bool) -> Value {
    json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": ready, "restartCount": 0,
           "started": state.get("running").is_some(), "state": state})
}

/// The pod is on its node: the kubelet admits it or refuses it (sched::kubelet_admit),
/// then starts its containers. Returns the pod as stored.
fn bind(s: &Arc<Shared>, st: &mut State, ns: &str, name: &str) -> Value {
    let key = (ns.to_string(), name.to_string());
    let pod = st.pods[&key].obj.clone();
    let node = st
        .nodes
        .iter()
        .find(|n| n["metadata"]["name"] == pod["spec"]["nodeName"])
        .cloned()
        .unwrap();
    let others: Vec<&Value> = bound(st)
        .into_iter()
        .filter(|p| p["metadata"]["uid"] != pod["metadata"]["uid"])
        .collect();
    let admitted = sched::kubelet_admit(&pod, &node, &others);
    st.rv += 1;
    let host_ip = node["status"]["addresses"][0]["address"].clone();
    let pod_ip: Value = if pod["spec"]["hostNetwork"] == true {
        host_ip.clone()
    } else {
        format!("10.100.0.{}", st.rv % 250 + 2).into()
    };
    let t = ts();
    if let Err((reason, message)) = admitted {
        let p = &mut st.pods.get_mut(&key).unwrap().obj;
        p["status"] = json!({"phase": "Failed", "reason": reason, "message": message, "hostIP": host_ip, "startTime": t});
        let obj = p.clone();
        event(st, &obj, "Warning", &reason, &message, "kubelet");
        return obj;
    }
    let have = st
        .node_devices
        .get(node["metadata"]["name"].as_str().unwrap_or(""))
        .cloned()
        .unwrap_or_default();
    let inits: Vec<Value> = sched::containers(&pod, "initContainers").cloned().collect();
    let mains: Vec<Value> = sched::containers(&pod, "containers").cloned().collect();
    let waiting = json!({"waiting": {"reason": "PodInitializing"}});
    let plain_init = inits.iter().any(|c| c["restartPolicy"] != "Always");
    let mut status = json!({"phase": "Pending", "hostIP": host_ip, "podIP": pod_ip, "startTime": t,
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": t}],
        "initContainerStatuses": inits.iter().map(|c| container_status(c, waiting.clone(), false)).collect::<Vec<_>>(),
        "containerStatuses": mains.iter().map(|c| container_status(c, waiting.clone(), false)).collect::<Vec<_>>()});
    // Without plain init containers and with every device there, the pod runs at once
    // (its processes start right after); otherwise run_pod moves it on.
    let devices_ok = inits
        .iter()
        .chain(&mains)
        .all(|c| devices::check(&pod, c["name"].as_str().unwrap_or(""), &have).is_ok());
    if !plain_init && devices_ok {
        status["phase"] = "Running".into();
        status["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "Ready", "status": "True", "lastTransitionTime": t}));
        let run = json!({"running": {"startedAt": t}});
        status["initContainerStatuses"] = inits
            .iter()
            .map(|c| container_status(c, run.clone(), true))
            .collect::<Vec<_>>()
            .into();
        status["containerStatuses"] = mains
            .iter()
            .map(|c| container_status(c, run.clone(), true))
            .collect::<Vec<_>>()
            .into();
    }
    let rec = st.pods.get_mut(&key).unwrap();
    rec.obj["status"] = status;
    std::fs::create_dir_all(&rec.dir).unwrap();
    let obj = rec.obj.clone();
    let s2 = s.clone();
    tokio::spawn(async move { run_pod(s2, key.0, key.1, have).await });
    obj
}

/// Set one container's state in the pod's status.
fn set_state(s: &Shared, ns: &str, name: &str, which: &str, c: &str, state: Value, ready: bool) {
    let mut st = s.state.lock().unwrap();
    st.rv += 1;
    if let Some(p) = st.pods.get_mut(&(ns.to_string(), name.to_string())) {
        for cs in p.obj["status"][which].as_array_mut().into_iter().flatten() {
            if cs["name"] == c {
                cs["started"] = state.get("running").is_some().into();
                cs["state"] = state.clone();
                cs["ready"] = ready.into();
            }
        }
    }
}

fn set_phase(s: &Shared, ns: &str, name: &str, phase: &str) {
    let mut st = s.state.lock().unwrap();
    st.rv += 1;
    if let Some(p) = st.pods.get_mut(&(ns.to_string(), name.to_string())) {
        p.obj["status"]["phase"] = phase.into();
        if phase == "Running" && !p.obj["status"]["conditions"].to_string().contains("\"Ready\"") {
            p.obj["status"]["conditions"]
                .as_array_mut()
                .unwrap()
                .push(json!({"type": "Ready", "status": "True", "lastTransitionTime": ts()}));
        }
    }
}

/// A container the injector cannot create: waiting with CreateContainerError, a
/// kubelet event (pkg/kubelet/kuberuntime/kuberuntime_container.go, startContainer:
/// ErrCreateContainer), the pod left where it was.
fn create_error(s: &Shared, ns: &str, name: &str, which: &str, c: &str, msg: &str) {
    set_state(
        s,
        ns,
        name,
        which,
        c,
        json!({"waiting": {"reason": "CreateContainerError", "message": msg}}),
        false,
    );
    let mut st = s.state.lock().unwrap();
    if let Some(obj) = st
        .pods
        .get(&(ns.to_string(), name.to_string()))
        .map(|p| p.obj.clone())
    {
        event(
            &mut st,
            &obj,
            "Warning",
            "Failed",
            &format!("Error: {msg}"),
            "kubelet",
        );
    }
}

/// The kubelet's start of a pod (pkg/kubelet/kuberuntime/kuberuntime_manager.go,
/// SyncPod and computePodActions): init containers one by one, each plain one to its
/// end (a failing one fails the pod under `restartPolicy: Never`), each native sidecar
/// (`restartPolicy: Always`, KEP-753) started and left running; then every main
/// container; when the main containers have all ended the sidecars are stopped
/// (pkg/kubelet/kuberuntime/kuberuntime_termination_order.go) and the pod is Succeeded
/// when every main container exited 0, else Failed (pkg/kubelet/kubelet_pods.go, getPhase).
async fn run_pod(s: Arc<Shared>, ns: String, name: String, have: Vec<String>) {
    let Some((pod, dir)) = ({
        let st = s.state.lock().unwrap();
        st.pods
            .get(&(ns.clone(), name.clone()))
            .map(|p| (p.obj.clone(), p.dir.clone()))
    }) else {
        return;
    };
    let mut sidecars = vec![];
    for c in sched::containers(&pod, "initContainers")
        .cloned()
        .collect::<Vec<_>>()
    {
        let cname = c["name"].as_str().unwrap_or("").to_string();
        if !wait_secrets(&s, &ns, &name, "initContainerStatuses", &c).await {
            stop(&sidecars);
            return;
        }
        if let Err(msg) = devices::check(&pod, &cname, &have) {
            create_error(&s, &ns, &name, "initContainerStatuses", &cname, &msg);
            stop(&sidecars);
            return;
        }
        let started = ts();
        let Some(run) = spawn(&s, &pod, &dir, &ns, &name, &c) else {
            set_state(
                &s,
                &ns,
                &name,
                "initContainerStatuses",
                &cname,
                json!({"terminated": {"exitCode": 128, "reason": "StartError", "finishedAt": ts()}}),
                false,
            );
            set_phase(&s, &ns, &name, "Failed");
            stop(&sidecars);
            settle_jobsets(&s);
            return;
        };
        let is_sidecar = c["restartPolicy"] == "Always";
        set_state(
            &s,
            &ns,
            &name,
            "initContainerStatuses",
            &cname,
            json!({"running": {"startedAt": started}}),
            is_sidecar,
        );
        if is_sidecar {
            sidecars.push(run);
            continue;
        }
        let code = run.wait().await;
        let term = terminated(code, Some(&started));
        set_state(&s, &ns, &name, "initContainerStatuses", &cname, term, false);
        if code != 0 {
            stop(&sidecars);
            set_phase(&s, &ns, &name, "Failed");
            mark_done(&s, &ns, &name);
            settle_jobsets(&s);
            return;
        }
    }
    let mut mains = vec![];
    let mut create_failed = false;
    for c in sched::containers(&pod, "containers").cloned().collect::<Vec<_>>() {
        let cname = c["name"].as_str().unwrap_or("").to_string();
        if !wait_secrets(&s, &ns, &name, "containerStatuses", &c).await {
            stop(&sidecars);
            return;
        }
        if let Err(msg) = devices::check(&pod, &cname, &have) {
            create_error(&s, &ns, &name, "containerStatuses", &cname, &msg);
            create_failed = true;
            continue;
        }
        let started = ts();
        match spawn(&s, &pod, &dir, &ns, &name, &c) {
            Some(run) => {
                set_state(
                    &s,
                    &ns,
                    &name,
                    "containerStatuses",
                    &cname,
                    json!({"running": {"startedAt": started}}),
                    true,
                );
                mains.push((cname, started, run));
            }
            None => {
                set_state(
                    &s,
                    &ns,
                    &name,
                    "containerStatuses",
                    &cname,
                    json!({"terminated": {"exitCode": 128, "reason": "StartError", "finishedAt": ts()}}),
                    false,
                );
                mains.push((cname, started, Run::failed()));
            }
        }
    }
    if !create_failed {
        set_phase(&s, &ns, &name, "Running");
    }
    let mut all_ok = true;
    let waits = mains.into_iter().map(|(cname, started, run)| {
        let s = s.clone();
        let (ns, name) = (ns.clone(), name.clone());
        async move {
            let code = run.wait().await;
            let term = terminated(code, Some(&started));
            set_state(&s, &ns, &name, "containerStatuses", &cname, term, false);
            code
        }
    });
    for code in futures::future::join_all(waits).await {
        all_ok &= code == 0;
    }
    // Sidecars stop once the main containers have ended.
    stop(&sidecars);
    for r in sidecars {
        let cname = r.name.clone();
        let code = r.wait().await;
        set_state(
            &s,
            &ns,
            &name,
            "initContainerStatuses",
            &cname,
            terminated(code, None),
            false,
        );
    }
    if create_failed {
        // The kubelet retries the container's creation; the pod stays Pending.
        set_phase(&s, &ns, &name, "Pending");
        mark_done(&s, &ns, &name);
        return;
    }
    set_phase(&s, &ns, &name, if all_ok { "Succeeded" } else { "Failed" });
    mark_done(&s, &ns, &name);
    settle_jobsets(&s);
}

/// A container's `terminated` state after it exited with `code` (the kubelet's reason:
/// Completed for 0, else Error).
fn terminated(code: i32, started: Option<&str>) -> Value {
    let mut t = json!({"exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" }, "finishedAt": ts()});
    if let Some(at) = started {
        t["startedAt"] = at.into();
    }
    json!({ "terminated": t })
}

fn mark_done(s: &Shared, ns: &str, name: &str) {
    let st = s.state.lock().unwrap();
    if let Some(p) = st.pods.get(&(ns.to_string(), name.to_string())) {
        *p.done.lock().unwrap() = true;
    }
}

/// A started container: its process group and the task that reads its output.
pub(super) struct Run {
    name: String,
    pgid: Option<i32>,
    task: Option<tokio::task::JoinHandle<i32>>,
}

impl Run {
    fn failed() -> Run {
        Run {
            name: String::new(),
            pgid: None,
            task: None,
        }
    }
    async fn wait(self) -> i32 {
        match self.task {
            Some(t) => t.await.unwrap_or(137),
            None => 128,
        }
    }
}

fn stop(runs: &[Run]) {
    for r in runs {
        if let Some(g) = r.pgid {
            unsafe { libc::kill(-g, libc::SIGTERM) };
        }
    }
}

/// Start container `c` of the pod as a process group, its output to its own log.
fn spawn(s: &Arc<Shared>, pod: &Value, dir: &Path, ns: &str, name: &str, c: &Value) -> Option<Run> {
    let cname = c["name"].as_str().unwrap_or("").to_string();
    let argv = container_argv(c);
    let (log, ended) = {
        let st = s.state.lock().unwrap();
        let ctr = &st.pods.get(&(ns.to_string(), name.to_string()))?.ctrs[&cname];
        (ctr.log.clone(), ctr.ended.clone())
    };
    let mut cmd = command(s, pod, c, dir, &argv);
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            log.lock()
                .unwrap()
                .push((now_rfc3339(), format!("exec {}: {e}", argv[0])));
            *ended.lock().unwrap() = true;
            return None;
        }
    };
    let pgid = child.id().map(|i| i as i32);
    if let Some(p) = s
        .state
        .lock()
        .unwrap()
        .pods
        .get_mut(&(ns.to_string(), name.to_string()))
    {
        p.pgids.extend(pgid);
    }
    let pump = |r: Box<dyn tokio::io::AsyncRead + Unpin + Send>, log: Arc<Mutex<Vec<(String, String)>>>| async move {
        let mut lines = BufReader::new(r).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            let mut g = log.lock().unwrap();
            if g.len() < 200_000 {
                g.push((now_rfc3339(), l));
            }
        }
    };
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let task = tokio::spawn(async move {
        tokio::join!(pump(Box::new(out), log.clone()), pump(Box::new(err), log.clone()));
        let code = child
            .wait()
            .await
            .ok()
            .and_then(|s| {
                s.code()
                    .or_else(|| std::os::unix::process::ExitStatusExt::signal(&s).map(|g| 128 + g))
            })
            .unwrap_or(137);
        *ended.lock().unwrap() = true;
        code
    });
    Some(Run {
        name: cname,
        pgid,
        task: Some(task),
    })
}

pub(super) fn container_argv(c: &Value) -> Vec<String> {
    let mut argv: Vec<String> = c["command"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(c["args"].as_array().into_iter().flatten())
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    if argv.is_empty() {
        argv = vec!["sleep".into(), "infinity".into()];
    }
    argv
}

/// The container `container` names, or the pod's only main container; several and none
/// named is the API server's error (pkg/registry/core/pod/strategy.go, LogLocation and
/// ExecLocation: "a container name must be specified for pod X, choose one of: [...]").
pub(super) fn pick_container(pod: &Value, container: Option<&str>) -> Result<Value, String> {
    let name = pod["metadata"]["name"].as_str().unwrap_or("");
    let mains: Vec<&Value> = sched::containers(pod, "containers").collect();
    match container.filter(|c| !c.is_empty()) {
        Some(c) => sched::containers(pod, "containers")
            .chain(sched::containers(pod, "initContainers"))
            .find(|x| x["name"] == c)
            .cloned()
            .ok_or_else(|| format!("container {c} is not valid for pod {name}")),
        None if mains.len() == 1 => Ok(mains[0].clone()),
        None => {
            let names: Vec<&str> = mains.iter().filter_map(|c| c["name"].as_str()).collect();
            let inits: Vec<&str> = sched::containers(pod, "initContainers")
                .filter_map(|c| c["name"].as_str())
                .collect();
            let mut m = format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                names.join(" ")
            );
            if !inits.is_empty() {
                m.push_str(&format!(" or one of the init containers: [{}]", inits.join(" ")));
            }
            Err(m)
        }
    }
}

/// The environment container `c` of `pod` gets (PATH with its image's directory first).
pub(super) fn container_env(s: &Shared, pod: &Value, c: &Value, dir: &Path) -> Vec<(String, String)> {
    let image = c["image"].as_str().unwrap_or("");
    let mut path = std::env::var("PATH").unwrap_or_default();
    if let Some((_, d)) = s.opts.images.iter().find(|(p, _)| image.starts_with(p.as_str())) {
        path = format!("{}:{path}", d.display());
    }
    let mut env = vec![
        ("PATH".to_string(), path),
        ("HOME".into(), dir.display().to_string()),
        (
            "HOSTNAME".into(),
            pod["spec"]["hostname"]
                .as_str()
                .or(pod["metadata"]["name"].as_str())
                .unwrap_or("")
                .to_string(),
        ),
    ];
    // envFrom, then env over it (a container whose Secret is missing was held back
    // before it started: see `wait_secrets`).
    let (from, refs) = super::secret_env(s, pod, c).unwrap_or_default();
    env.extend(from);
    for e in c["env"].as_array().into_iter().flatten() {
        let k = e["name"].as_str().unwrap_or("").to_string();
        let v = if let Some(v) = e["value"].as_str() {
            v.to_string()
        } else if let Some(f) = e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            field(pod, f)
        } else if let Some(v) = refs.iter().find(|(n, _)| *n == k) {
            v.1.clone()
        } else {
            String::new()
        };
        env.retain(|(ek, _)| *ek != k);
        env.push((k, v));
    }
    env
}

/// The kubelet does not start a container whose Secret (envFrom, secretKeyRef) is
/// missing: it waits in CreateContainerConfigError and is tried again until the Secret
/// appears (pkg/kubelet/kuberuntime/kuberuntime_container.go, startContainer ->
/// generateContainerConfig -> makeEnvironmentVariables). False when the pod went away.
async fn wait_secrets(s: &Shared, ns: &str, name: &str, which: &str, c: &Value) -> bool {
    let cname = c["name"].as_str().unwrap_or("");
    loop {
        let now = {
            let st = s.state.lock().unwrap();
            match st.pods.get(&(ns.to_string(), name.to_string())) {
                Some(p) => p.obj.clone(),
                None => return false,
            }
        };
        match super::secret_env(s, &now, c) {
            Ok(_) => return true,
            Err(why) => {
                set_state(
                    s,
                    ns,
                    name,
                    which,
                    cname,
                    json!({"waiting": {"reason": "CreateContainerConfigError", "message": why}}),
                    false,
                );
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

fn field(pod: &Value, path: &str) -> String {
    let pick = |v: &Value| v.as_str().unwrap_or("").to_string();
    for (prefix, at) in [
        ("metadata.annotations['", "annotations"),
        ("metadata.labels['", "labels"),
    ] {
        if let Some(k) = path.strip_prefix(prefix).and_then(|r| r.strip_suffix("']")) {
            return pick(&pod["metadata"][at][k]);
        }
    }
    match path {
        "metadata.name" => pick(&pod["metadata"]["name"]),
        "metadata.namespace" => pick(&pod["metadata"]["namespace"]),
        "spec.nodeName" => pick(&pod["spec"]["nodeName"]),
        "status.podIP" => pick(&pod["status"]["podIP"]),
        "status.hostIP" => pick(&pod["status"]["hostIP"]),
        _ => String::new(),
    }
}

pub(super) fn command(
    s: &Shared,
    pod: &Value,
    c: &Value,
    dir: &Path,
    argv: &[String],
) -> tokio::process::Command {
    let mounts = host_mounts(s, pod, c);
    let argv: Vec<String> = if mounts.is_empty() {
        argv.to_vec()
    } else {
        let mut v: Vec<String> = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c"]
            .iter()
            .map(|w| w.to_string())
            .collect();
        v.push(mount_script(&dir.join(".hostpath"), &mounts));
        v.push("sh".into());
        v.extend(argv.iter().cloned());
        v
    };
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]).env_clear().current_dir(dir);
    for (k, v) in container_env(s, pod, c, dir) {
        cmd.env(k, v);
    }
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    cmd
}

/// The hostPath volumes container `c` mounts, as (the node's directory, mountPath): the
/// node's filesystem is [`super::Options::node_roots`]; none without it.
fn host_mounts(s: &Shared, pod: &Value, c: &Value) -> Vec<(PathBuf, String)> {
    let Some(roots) = &s.opts.node_roots else {
        return vec![];
    };
    let node = pod["spec"]["nodeName"].as_str().unwrap_or("");
    let root = if !node.is_empty() && roots.join(node).is_dir() {
        roots.join(node)
    } else {
        roots.join("default")
    };
    let volumes = pod["spec"]["volumes"].as_array().cloned().unwrap_or_default();
    let mut out: Vec<(PathBuf, String)> = c["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let v = volumes.iter().find(|v| v["name"] == m["name"])?;
            let host = v["hostPath"]["path"].as_str()?;
            let at = m["mountPath"].as_str()?;
            Some((root.join(host.trim_start_matches('/')), at.to_string()))
        })
        .collect();
    // Parents before children.
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

/// The shell (run by `unshare --mount`, the container's argv after it) that binds each
/// node directory at its mountPath and then execs the container's command. A mountPath
/// this machine lacks (/usr/local/nvidia) is made in an overlay over its deepest
/// existing ancestor, in this namespace only: this machine's own directories are never
/// written. A missing node directory is made, as the runtime makes a hostPath of no type.
/// Each namespace (the container's, each exec into it) has its overlays' upper and work
/// directories of its own: an overlay's are never shared.
fn mount_script(scratch: &Path, mounts: &[(PathBuf, String)]) -> String {
    let q = flightdeck::shellenv::quote;
    let scratch = q(&scratch.display().to_string());
    let mut s = format!(
        "set -e\nmkdir -p {scratch}\nT=$(mktemp -d {scratch}/ns.XXXXXX)\nn=0; OV=\n\
         at() {{ [ -e \"$1\" ] && return 0; a=$1; while [ ! -e \"$a\" ]; do a=$(dirname \"$a\"); done\n\
         case \" $OV \" in *\" $a \"*) ;; *) n=$((n+1)); mkdir -p \"$T/u$n\" \"$T/w$n\"; mount -t overlay overlay -o \"lowerdir=$a,upperdir=$T/u$n,workdir=$T/w$n\" \"$a\"; OV=\"$OV $a\" ;; esac\n\
         mkdir -p \"$1\"; }}\n"
    );
    for (src, at) in mounts {
        let src = q(&src.display().to_string());
        let at = q(at);
        s.push_str(&format!("mkdir -p {src}; at {at}; mount --bind {src} {at}\n"));
    }
    s.push_str("exec \"$@\"\n");
    s
}

pub(super) fn delete_pod(s: &Arc<Shared>, ns: &str, name: &str) -> Option<Value> {
    let rec = s
        .state
        .lock()
        .unwrap()
        .pods
        .remove(&(ns.to_string(), name.to_string()))?;
    kill_pod(&rec);
    Some(rec.obj)
}

pub(super) fn kill_pod(rec: &PodRec) {
    if *rec.done.lock().unwrap() {
        return;
    }
    for &g in &rec.pgids {
        unsafe { libc::kill(-g, libc::SIGTERM) };
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(2));
            unsafe { libc::kill(-g, libc::SIGKILL) };
        });
    }
}

impl PodRec {
    pub(super) fn new(obj: Value, dir: PathBuf) -> PodRec {
        let ctrs: BTreeMap<String, Ctr> = sched::containers(&obj, "initContainers")
            .chain(sched::containers(&obj, "containers"))
            .filter_map(|c| c["name"].as_str())
            .map(|n| (n.to_string(), Ctr::default()))
            .collect();
        PodRec {
            obj,
            ctrs,
            done: Default::default(),
            pgids: vec![],
            dir,
        }
    }
}

/// Events, read-only: `/api/v1/events` and per namespace, with the field selectors
/// `kubectl get events` and `kubectl describe` use (involvedObject.name/kind/namespace,
/// reason, type).
pub(super) fn events_route(st: &State, m: &str, segs: &[&str], fields: Option<&str>) -> Option<(u16, Value)> {
    if m != "GET" {
        return None;
    }
    let ns = match segs {
        ["api", "v1", "events"] => None,
        ["api", "v1", "namespaces", ns, "events"] => Some(*ns),
        _ => return None,
    };
    let want = |e: &Value| {
        fields.filter(|f| !f.is_empty()).is_none_or(|f| {
            f.split(',').all(|t| match t.split_once('=') {
                Some((k, v)) => {
                    let mut at = e;
                    for part in k.split('.') {
                        at = &at[part];
                    }
                    at.as_str() == Some(v.trim_start_matches('='))
                }
                None => true,
            })
        })
    };
    let items: Vec<Value> = st
        .events
        .iter()
        .filter(|e| ns.is_none_or(|n| e["metadata"]["namespace"] == n))
        .filter(|e| want(e))
        .cloned()
        .collect();
    Some((
        200,
        json!({"kind": "EventList", "apiVersion": "v1", "metadata": {"resourceVersion": st.rv.to_string()}, "items": items}),
    ))
}
