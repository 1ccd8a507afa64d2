//! The Kubernetes/GKE double's own rules (tests/support/k8s_double.rs and its
//! submodules): each test shows the double refusing, or behaving, as the real system it
//! models does (kube-scheduler, the kubelet, GKE's admission and device injector, the
//! cluster autoscaler, Kueue's provisioning admission check). The reference each rule
//! follows is named at the rule's code.

mod support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::k8s_double::{KubeDouble, NodeSpec, Options, PoolSpec, Provisioning, Taint};

fn node(name: &str, pool: &str, machine: &str, p: Provisioning) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        pool: pool.into(),
        machine_type: machine.into(),
        accelerator: "nvidia-h200-141gb".into(),
        gpus: 8,
        provisioning: p,
        internal_ip: format!("10.0.0.{}", 10 + name.len()),
    }
}

/// Two flex-start nodes and a spot one, 8 GPUs each.
fn nodes() -> Vec<NodeSpec> {
    vec![
        node("flex-0", "a3u-flex", "a3-ultragpu-8g", Provisioning::FlexStart),
        node("flex-1", "a3u-flex", "a3-ultragpu-8g", Provisioning::FlexStart),
        node("spot-0", "a3u-spot", "a3-ultragpu-8g", Provisioning::Spot),
    ]
}

fn start(nodes: Vec<NodeSpec>) -> KubeDouble {
    KubeDouble::start(Options {
        nodes,
        ..Options::default()
    })
}

/// One HTTP request to the double: status and JSON body (or the text as a string).
fn api(d: &KubeDouble, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    use std::io::{Read, Write};
    let body = body.map(|b| serde_json::to_vec(b).unwrap()).unwrap_or_default();
    let mut s = std::net::TcpStream::connect(d.url.trim_start_matches("http://")).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).unwrap();
    s.write_all(&body).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let code: u16 = out[9..12].parse().unwrap();
    let (head, rest) = out.split_once("\r\n\r\n").unwrap();
    let text = if head.contains("chunked") {
        let mut t = String::new();
        let mut r = rest;
        while let Some((len, tail)) = r.split_once("\r\n") {
            let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            t.push_str(&tail[..n]);
            r = &tail[n + 2..];
        }
        t
    } else {
        rest.to_string()
    };
    (code, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

fn post_pod(d: &KubeDouble, pod: Value) -> Value {
    let (code, v) = api(d, "POST", "/api/v1/namespaces/default/pods", Some(&pod));
    assert_eq!(code, 201, "{v}");
    v
}

fn pod(d: &KubeDouble, name: &str) -> Value {
    d.pods()
        .into_iter()
        .find(|p| p["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no pod {name}"))
}

/// Wait up to `secs` for `f` to hold.
fn until(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < end, "not within {secs}s: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn phase(d: &KubeDouble, name: &str) -> String {
    pod(d, name)["status"]["phase"].as_str().unwrap_or("").to_string()
}

fn gpu_pod(name: &str, gpus: u32, extra: Value) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "30"],
            "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}});
    merge(&mut p, extra);
    p
}

fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

fn unschedulable_message(d: &KubeDouble, name: &str) -> String {
    let p = pod(d, name);
    assert_eq!(p["status"]["phase"], "Pending", "{p}");
    assert!(p["spec"]["nodeName"].is_null(), "{p}");
    let c = &p["status"]["conditions"][0];
    assert_eq!(c["type"], "PodScheduled", "{p}");
    assert_eq!(c["reason"], "Unschedulable", "{p}");
    c["message"].as_str().unwrap().to_string()
}

#[test]
fn the_kubelet_refuses_a_pod_bound_by_node_name_whose_gpus_do_not_fit() {
    let d = start(nodes());
    post_pod(&d, gpu_pod("a", 8, json!({"spec": {"nodeName": "flex-0"}})));
    assert_eq!(phase(&d, "a"), "Running");
    // nodeName skips the scheduler, not the kubelet's admission.
    let b = post_pod(&d, gpu_pod("b", 1, json!({"spec": {"nodeName": "flex-0"}})));
    assert_eq!(b["status"]["phase"], "Failed", "{b}");
    assert_eq!(b["status"]["reason"], "OutOfnvidia.com/gpu", "{b}");
    assert_eq!(
        b["status"]["message"],
        "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 8, capacity: 8"
    );
    assert!(d.events().iter().any(|e| e["reason"] == "OutOfnvidia.com/gpu"));
}

#[test]
fn a_node_selector_no_node_matches_leaves_the_pod_pending_with_the_reasons() {
    let d = start(nodes());
    post_pod(
        &d,
        gpu_pod(
            "p",
            8,
            json!({"spec": {"nodeSelector": {"cloud.google.com/gke-nodepool": "nope"}}}),
        ),
    );
    let m = unschedulable_message(&d, "p");
    assert_eq!(
        m,
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    );
    let ev: Vec<Value> = d
        .events()
        .into_iter()
        .filter(|e| e["reason"] == "FailedScheduling")
        .collect();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["message"], m.as_str());
    assert_eq!(ev[0]["involvedObject"]["name"], "p");
    // Served for reads, as kubectl describe reads them.
    let (code, list) = api(
        &d,
        "GET",
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dp",
        None,
    );
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
}

#[test]
fn required_node_affinity_takes_each_operator() {
    let d = start(nodes());
    let aff = |exprs: Value| json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}}}});
    let pool = "cloud.google.com/gke-nodepool";
    let cases = [
        (
            "in",
            json!([{"key": pool, "operator": "In", "values": ["a3u-spot"]}]),
            Some("spot-0"),
        ),
        (
            "notin",
            json!([{"key": pool, "operator": "NotIn", "values": ["a3u-flex"]}]),
            Some("spot-0"),
        ),
        (
            "exists",
            json!([{"key": "cloud.google.com/gke-spot", "operator": "Exists"}]),
            Some("spot-0"),
        ),
        (
            "dne",
            json!([{"key": "cloud.google.com/gke-spot", "operator": "DoesNotExist"}, {"key": "kubernetes.io/hostname", "operator": "In", "values": ["flex-1"]}]),
            Some("flex-1"),
        ),
        // Gt/Lt compare integers; a label that is none matches neither.
        (
            "gt",
            json!([{"key": pool, "operator": "Gt", "values": ["1"]}]),
            None,
        ),
        (
            "lt",
            json!([{"key": pool, "operator": "Lt", "values": ["1"]}]),
            None,
        ),
        (
            "none",
            json!([{"key": pool, "operator": "In", "values": ["a3u-dws"]}]),
            None,
        ),
    ];
    for (name, exprs, want) in cases {
        post_pod(&d, gpu_pod(name, 0, aff(exprs)));
        let p = pod(&d, name);
        match want {
            Some(n) => assert_eq!(p["spec"]["nodeName"], n, "{name}: {p}"),
            None => {
                let m = unschedulable_message(&d, name);
                assert!(
                    m.contains("3 node(s) didn't match Pod's node affinity/selector"),
                    "{name}: {m}"
                );
            }
        }
    }
}

#[test]
fn gpu_nodes_are_tainted_and_only_gpu_pods_get_the_toleration() {
    let d = start(nodes());
    // No GPUs asked, no toleration: GKE's nvidia.com/gpu=present:NoSchedule keeps it off.
    post_pod(
        &d,
        gpu_pod(
            "cpu",
            0,
            json!({"spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "5"]}]}}),
        ),
    );
    assert_eq!(
        unschedulable_message(&d, "cpu"),
        "0/3 nodes are available: 3 node(s) had untolerated taint {nvidia.com/gpu: present}."
    );
    // Asking for a GPU: ExtendedResourceToleration adds the toleration.
    let g = post_pod(&d, gpu_pod("gpu", 1, json!({})));
    assert!(
        g["spec"]["tolerations"]
            .as_array()
            .unwrap()
            .contains(&json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})),
        "{g}"
    );
    assert_eq!(g["status"]["phase"], "Running", "{g}");
}

#[test]
fn a_spot_pool_taint_holds_off_pods_that_do_not_tolerate_it() {
    let spot_pool = PoolSpec {
        name: "a3u-spot".into(),
        machine_type: "a3-ultragpu-8g".into(),
        accelerator: "nvidia-h200-141gb".into(),
        gpus: 8,
        provisioning: Provisioning::Spot,
        min_nodes: 1,
        max_nodes: 1,
        taints: vec![Taint {
            key: "cloud.google.com/gke-spot".into(),
            value: "true".into(),
            effect: "NoSchedule".into(),
        }],
        queued: false,
    };
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        pools: vec![spot_pool],
        ..Options::default()
    });
    let sel = json!({"spec": {"nodeSelector": {"cloud.google.com/gke-spot": "true"}}});
    post_pod(&d, gpu_pod("intolerant", 8, sel.clone()));
    assert_eq!(
        unschedulable_message(&d, "intolerant"),
        "0/3 nodes are available: 1 node(s) had untolerated taint {cloud.google.com/gke-spot: true}, 2 node(s) didn't match Pod's node affinity/selector."
    );
    let mut tol = sel;
    tol["spec"]["tolerations"] = json!([{"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]);
    let p = post_pod(&d, gpu_pod("tolerant", 8, tol));
    assert_eq!(p["spec"]["nodeName"], "spot-0", "{p}");
}

#[test]
fn pods_wait_for_free_gpus_and_are_placed_when_some_free_up() {
    let d = start(nodes());
    for (n, node) in [("a", "flex-0"), ("b", "flex-1"), ("c", "spot-0")] {
        post_pod(&d, gpu_pod(n, 8, json!({"spec": {"nodeName": node}})));
    }
    post_pod(&d, gpu_pod("d", 4, json!({})));
    assert_eq!(
        unschedulable_message(&d, "d"),
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    );
    let (code, _) = api(&d, "DELETE", "/api/v1/namespaces/default/pods/b", None);
    assert_eq!(code, 200);
    until(10, "d is scheduled once b's GPUs are free", || {
        pod(&d, "d")["spec"]["nodeName"] == "flex-1"
    });
    until(10, "d runs", || phase(&d, "d") == "Running");
}

#[test]
fn required_pod_anti_affinity_keeps_a_second_rank_off_the_node() {
    let d = start(nodes());
    let anti = json!({"metadata": {"labels": {"app": "x"}}, "spec": {"nodeSelector": {"cloud.google.com/gke-nodepool": "a3u-spot"},
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x"]}]}, "topologyKey": "kubernetes.io/hostname"}]}}}});
    post_pod(&d, gpu_pod("r0", 1, anti.clone()));
    assert_eq!(pod(&d, "r0")["spec"]["nodeName"], "spot-0");
    post_pod(&d, gpu_pod("r1", 1, anti));
    assert_eq!(
        unschedulable_message(&d, "r1"),
        "0/3 nodes are available: 1 node(s) didn't match pod anti-affinity rules, 2 node(s) didn't match Pod's node affinity/selector."
    );
}

#[test]
fn the_device_injector_fails_a_container_whose_device_the_node_lacks() {
    let d = start(vec![
        node("ultra-0", "a3u", "a3-ultragpu-8g", Provisioning::Standard),
        node("mega-0", "a3m", "a3-megagpu-8g", Provisioning::Standard),
    ]);
    let devs = "- path: /dev/nvidia0\n- path: /dev/nvidiactl\n- path: /dev/dmabuf_import_helper\n";
    let with = |n: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("rxdm-{n}"), "annotations": {"devices.gke.io/container.rxdm": devs}},
            "spec": {"nodeName": n, "restartPolicy": "Never", "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "rxdm", "image": "busybox", "command": ["sh", "-c", "echo up; sleep 30"]}]}})
    };
    // A3 Ultra has no dmabuf import helper (only A3 Mega's TCPXO installer loads it).
    let p = post_pod(&d, with("ultra-0"));
    assert_eq!(p["status"]["phase"], "Pending", "{p}");
    until(5, "the container's creation fails", || {
        pod(&d, "rxdm-ultra-0")["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
            == "CreateContainerError"
    });
    let p = pod(&d, "rxdm-ultra-0");
    let msg = p["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
        .as_str()
        .unwrap();
    assert!(
        msg.contains("lstat /dev/dmabuf_import_helper: no such file or directory"),
        "{msg}"
    );
    assert_eq!(p["status"]["phase"], "Pending");
    assert!(d.container_log("default", "rxdm-ultra-0", "rxdm").is_empty());
    // On A3 Mega the same pod runs.
    let p = post_pod(&d, with("mega-0"));
    assert_eq!(p["status"]["phase"], "Running", "{p}");
    until(5, "rxdm runs on A3 Mega", || {
        d.container_log("default", "rxdm-mega-0", "rxdm") == "up\n"
    });
    // An annotation that is no device list fails the container too.
    let mut bad = with("mega-0");
    bad["metadata"]["name"] = "bad".into();
    bad["metadata"]["annotations"]["devices.gke.io/container.rxdm"] = "path: /dev/nvidia0".into();
    post_pod(&d, bad);
    until(5, "the bad annotation fails the container", || {
        pod(&d, "bad")["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("invalid device annotation"))
    });
}

#[test]
fn init_containers_run_in_order_and_a_failing_one_fails_the_pod() {
    let d = start(nodes());
    let p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ordered"},
        "spec": {"nodeName": "flex-0", "restartPolicy": "Never", "tolerations": [{"operator": "Exists"}],
            "initContainers": [
                {"name": "one", "image": "busybox", "command": ["sh", "-c", "echo one >> $HOME/order"]},
                {"name": "two", "image": "busybox", "command": ["sh", "-c", "sleep 0.3; echo two >> $HOME/order"]}],
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "cat $HOME/order; echo main"]}]}});
    let created = post_pod(&d, p);
    assert_eq!(
        created["status"]["phase"], "Pending",
        "init containers first: {created}"
    );
    until(10, "the pod succeeds", || phase(&d, "ordered") == "Succeeded");
    assert_eq!(d.container_log("default", "ordered", "main"), "one\ntwo\nmain\n");
    let (code, log) = api(
        &d,
        "GET",
        "/api/v1/namespaces/default/pods/ordered/log?container=main",
        None,
    );
    assert_eq!((code, log), (200, Value::String("one\ntwo\nmain\n".into())));

    let p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "broken"},
        "spec": {"nodeName": "flex-1", "restartPolicy": "Never", "tolerations": [{"operator": "Exists"}],
            "initContainers": [{"name": "setup", "image": "busybox", "command": ["sh", "-c", "echo no; exit 3"]}],
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "echo ran"]}]}});
    post_pod(&d, p);
    until(10, "the pod fails", || phase(&d, "broken") == "Failed");
    let p = pod(&d, "broken");
    assert_eq!(
        p["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"], 3,
        "{p}"
    );
    assert!(
        p["status"]["containerStatuses"][0]["state"]["waiting"].is_object(),
        "{p}"
    );
    assert!(d.container_log("default", "broken", "main").is_empty());
}

#[test]
fn a_native_sidecar_starts_first_and_is_stopped_when_the_main_containers_end() {
    let d = start(nodes());
    let p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "side"},
        "spec": {"nodeName": "flex-0", "restartPolicy": "Never", "tolerations": [{"operator": "Exists"}],
            "initContainers": [{"name": "daemon", "image": "busybox", "restartPolicy": "Always",
                "command": ["sh", "-c", "touch $HOME/daemon-up; echo daemon up; exec sleep 300"]}],
            "containers": [
                {"name": "a", "image": "busybox", "command": ["sh", "-c", "while [ ! -e $HOME/daemon-up ]; do sleep 0.05; done; echo a saw daemon"]},
                {"name": "b", "image": "busybox", "command": ["sh", "-c", "echo b ran"]}]}});
    post_pod(&d, p);
    until(15, "the pod succeeds though its sidecar never exits", || {
        phase(&d, "side") == "Succeeded"
    });
    assert_eq!(d.container_log("default", "side", "a"), "a saw daemon\n");
    assert_eq!(d.container_log("default", "side", "b"), "b ran\n");
    assert_eq!(d.container_log("default", "side", "daemon"), "daemon up\n");
    let p = pod(&d, "side");
    assert!(
        p["status"]["initContainerStatuses"][0]["state"]["terminated"].is_object(),
        "the sidecar was stopped: {p}"
    );
    // Two main containers: the API wants the container named.
    let (code, v) = api(&d, "GET", "/api/v1/namespaces/default/pods/side/log", None);
    assert_eq!(code, 400);
    assert_eq!(
        v["message"],
        "a container name must be specified for pod side, choose one of: [a b] or one of the init containers: [daemon]"
    );
}

fn pool(name: &str, min: u32, max: u32) -> PoolSpec {
    PoolSpec {
        name: name.into(),
        machine_type: "a3-megagpu-8g".into(),
        accelerator: "nvidia-h100-mega-80gb".into(),
        gpus: 8,
        provisioning: Provisioning::Standard,
        min_nodes: min,
        max_nodes: max,
        taints: vec![],
        queued: false,
    }
}

#[test]
fn a_pool_at_zero_grows_for_a_pod_its_template_takes_and_not_for_others() {
    let d = KubeDouble::start(Options {
        pools: vec![pool("a3m", 0, 1)],
        scale_up_after: Duration::from_millis(300),
        ..Options::default()
    });
    assert!(d.nodes().is_empty());
    let sel = |p: &str| json!({"spec": {"nodeSelector": {"cloud.google.com/gke-nodepool": p}}});
    post_pod(&d, gpu_pod("fits", 8, sel("a3m")));
    assert_eq!(
        unschedulable_message(&d, "fits"),
        "no nodes available to schedule pods"
    );
    post_pod(&d, gpu_pod("elsewhere", 8, sel("a3u")));
    until(10, "a node of a3m joins, Ready, and the pod runs on it", || {
        phase(&d, "fits") == "Running"
    });
    let nodes = d.nodes();
    assert_eq!(nodes.len(), 1);
    let n = &nodes[0];
    assert_eq!(n["metadata"]["labels"]["cloud.google.com/gke-nodepool"], "a3m");
    assert_eq!(
        n["metadata"]["labels"]["node.kubernetes.io/instance-type"],
        "a3-megagpu-8g"
    );
    assert_eq!(pod(&d, "fits")["spec"]["nodeName"], n["metadata"]["name"]);
    let ev = d.events();
    assert!(
        ev.iter().any(|e| e["reason"] == "TriggeredScaleUp"
            && e["involvedObject"]["name"] == "fits"
            && e["message"] == "pod triggered scale-up: [{a3m 0->1 (max: 1)}]"),
        "{ev:?}"
    );
    assert!(
        ev.iter().any(|e| e["reason"] == "NotTriggerScaleUp"
            && e["involvedObject"]["name"] == "elsewhere"
            && e["message"]
                == "pod didn't trigger scale-up: 1 node(s) didn't match Pod's node affinity/selector"),
        "{ev:?}"
    );
    // At its maximum the pool grows no more.
    post_pod(&d, gpu_pod("more", 8, sel("a3m")));
    until(5, "the full pool is reported", || {
        d.events().iter().any(|e| {
            e["involvedObject"]["name"] == "more"
                && e["message"] == "pod didn't trigger scale-up: 1 max node group size reached"
        })
    });
    assert_eq!(d.nodes().len(), 1);
}

#[test]
fn an_idle_node_goes_away_unless_a_pod_blocks_its_drain() {
    let d = KubeDouble::start(Options {
        pools: vec![pool("a3m", 0, 3)],
        scale_down_after: Some(Duration::from_millis(500)),
        ..Options::default()
    });
    let on = |name: &str, extra: Value| {
        let mut p = gpu_pod(
            name,
            8,
            json!({"spec": {"nodeSelector": {"cloud.google.com/gke-nodepool": "a3m"},
            "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "true"],
                "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}),
        );
        merge(&mut p, extra);
        p
    };
    let owned = json!({"metadata": {"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": true}]}});
    post_pod(&d, on("job", owned.clone()));
    until(10, "the job pod ran", || phase(&d, "job") == "Succeeded");
    let job_node = pod(&d, "job")["spec"]["nodeName"].as_str().unwrap().to_string();
    until(10, "its node, idle, is removed", || {
        d.removed_nodes().iter().any(|(n, _)| *n == job_node)
    });
    assert!(
        !d.pods().iter().any(|p| p["metadata"]["name"] == "job"),
        "pods of a removed node are collected"
    );

    // A bare pod (no controller) holding a node blocks its removal, as a debug pod with
    // a hostPath would; annotated safe-to-evict it does not.
    let bare = |name: &str, extra: Value| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeSelector": {"cloud.google.com/gke-nodepool": "a3m"}, "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "300"]}]}});
        merge(&mut p, extra);
        p
    };
    post_pod(
        &d,
        on(
            "gpu-a",
            json!({"metadata": {"ownerReferences": owned["metadata"]["ownerReferences"]}, "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "300"], "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}),
        ),
    );
    until(10, "a node for gpu-a", || phase(&d, "gpu-a") == "Running");
    let node_a = pod(&d, "gpu-a")["spec"]["nodeName"].as_str().unwrap().to_string();
    post_pod(
        &d,
        bare(
            "debug",
            json!({"spec": {"nodeName": node_a, "volumes": [{"name": "host", "hostPath": {"path": "/"}}]}}),
        ),
    );
    let (code, _) = api(&d, "DELETE", "/api/v1/namespaces/default/pods/gpu-a", None);
    assert_eq!(code, 200);
    until(10, "the debug pod blocks the idle node", || {
        d.scale_down_blocked().get(&node_a).map(String::as_str) == Some("default/debug is not replicated")
    });
    std::thread::sleep(Duration::from_millis(1000));
    assert!(d.nodes().iter().any(|n| n["metadata"]["name"] == node_a.as_str()));
    assert!(!d.removed_nodes().iter().any(|(n, _)| *n == node_a));
    // A DaemonSet's pod (hostPath and all) never holds a node.
    post_pod(
        &d,
        bare(
            "daemon",
            json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "d", "controller": true}]},
                   "spec": {"nodeName": node_a, "volumes": [{"name": "host", "hostPath": {"path": "/"}}]}}),
        ),
    );
    let (code, _) = api(&d, "DELETE", "/api/v1/namespaces/default/pods/debug", None);
    assert_eq!(code, 200);
    post_pod(
        &d,
        bare(
            "evictable",
            json!({"metadata": {"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}},
                   "spec": {"nodeName": node_a, "volumes": [{"name": "scratch", "emptyDir": {}}]}}),
        ),
    );
    until(10, "a safe-to-evict pod does not hold the node", || {
        d.removed_nodes().iter().any(|(n, _)| *n == node_a)
    });
}

fn jobset(name: &str, queue: &str, nodes: u32, annotations: Value) -> Value {
    json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}, "annotations": annotations},
        "spec": {"suspend": false, "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {
            "parallelism": nodes, "completions": nodes, "completionMode": "Indexed",
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"restartPolicy": "Never",
                "nodeSelector": {"cloud.google.com/gke-nodepool": "dws"},
                "tolerations": [{"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": name}}, "topologyKey": "kubernetes.io/hostname"}]}},
                "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "echo rank $JOB_COMPLETION_INDEX"],
                    "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}}]}})
}

fn dws_double() -> KubeDouble {
    let mut dws = pool("dws", 0, 4);
    dws.queued = true;
    dws.provisioning = Provisioning::FlexStart;
    KubeDouble::start(Options {
        pools: vec![dws],
        queues: vec![("dws-queue".into(), true)],
        admit_after: Duration::from_millis(200),
        scale_up_after: Duration::from_millis(300),
        ..Options::default()
    })
}

fn provreq_conditions(d: &KubeDouble) -> Vec<String> {
    d.provisioning_requests()
        .first()
        .map(|p| {
            p["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["status"] == "True")
                .map(|c| c["type"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn kueue_holds_a_queued_jobset_until_its_provisioning_request_is_provisioned() {
    let d = dws_double();
    let js = jobset(
        "train",
        "dws-queue",
        2,
        json!({"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "7200"}),
    );
    let (code, v) = api(
        &d,
        "POST",
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets",
        Some(&js),
    );
    assert_eq!(code, 201, "{v}");
    // Kueue's webhook suspended it: no pods.
    assert_eq!(v["spec"]["suspend"], true, "{v}");
    assert!(d.pods().is_empty());
    until(10, "the ProvisioningRequest is made", || {
        !d.provisioning_requests().is_empty()
    });
    let pr = &d.provisioning_requests()[0];
    assert_eq!(pr["spec"]["provisioningClassName"], "queued-provisioning.gke.io");
    assert_eq!(pr["spec"]["parameters"]["maxRunDurationSeconds"], "7200");
    assert_eq!(pr["spec"]["podSets"][0]["count"], 2, "{pr}");
    let w = &d.workloads()[0];
    assert_eq!(w["spec"]["podSets"][0]["count"], 2, "pods, not GPUs: {w}");
    until(10, "Accepted then Provisioned", || {
        provreq_conditions(&d) == ["Accepted", "Provisioned"]
    });
    until(10, "the ranks run on the queued nodes", || {
        let pods: Vec<Value> = d.pods();
        pods.len() == 2 && pods.iter().all(|p| p["status"]["phase"] == "Succeeded")
    });
    let nodes = d.nodes();
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    assert!(nodes
        .iter()
        .all(|n| n["metadata"]["labels"]["cloud.google.com/gke-queued"] == "true"));
    let pr_name = d.provisioning_requests()[0]["metadata"]["name"].clone();
    assert!(d.pods().iter().all(|p| p["metadata"]["annotations"]
        ["autoscaling.x-k8s.io/consume-provisioning-request"]
        == pr_name));
    let w = &d.workloads()[0];
    assert_eq!(w["status"]["admissionChecks"][0]["state"], "Ready", "{w}");
    // Served for reads.
    let (code, list) = api(
        &d,
        "GET",
        "/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests",
        None,
    );
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
}

#[test]
fn a_provisioning_request_over_seven_days_fails_and_no_pod_starts() {
    let d = dws_double();
    let js = jobset(
        "long",
        "dws-queue",
        1,
        json!({"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "604801"}),
    );
    let (code, v) = api(
        &d,
        "POST",
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets",
        Some(&js),
    );
    assert_eq!(code, 201, "{v}");
    until(10, "the request fails", || provreq_conditions(&d) == ["Failed"]);
    until(5, "the check is rejected", || {
        d.workloads()[0]["status"]["admissionChecks"][0]["state"] == "Rejected"
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(d.pods().is_empty());
    assert!(d.nodes().is_empty());
    assert_eq!(d.jobsets()[0]["spec"]["suspend"], true);
}

#[test]
fn a_queued_pool_is_not_grown_for_pods_that_do_not_tolerate_its_taint() {
    let d = dws_double();
    let mut js = jobset("untolerant", "dws-queue", 1, json!({}));
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["tolerations"] = json!([]);
    let (code, v) = api(
        &d,
        "POST",
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets",
        Some(&js),
    );
    assert_eq!(code, 201, "{v}");
    until(10, "the request finds no pool", || {
        d.provisioning_requests().first().is_some_and(|p| {
            p["status"]["conditions"].as_array().unwrap().iter().any(|c| {
                c["type"] == "Provisioned"
                    && c["reason"] == "CapacityIsNotFound"
                    && c["message"]
                        .as_str()
                        .unwrap()
                        .contains("had untolerated taint {cloud.google.com/gke-queued: true}")
            })
        })
    });
    assert!(d.pods().is_empty() && d.nodes().is_empty());
}

#[test]
fn a_suspended_jobset_makes_no_pods() {
    let d = start(nodes());
    let mut js = jobset("held", "", 1, json!({}));
    js["metadata"]["labels"] = json!({});
    js["spec"]["suspend"] = true.into();
    let (code, v) = api(
        &d,
        "POST",
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets",
        Some(&js),
    );
    assert_eq!(code, 201, "{v}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(d.pods().is_empty(), "{:?}", d.pods());
}

#[test]
fn a_booking_no_pod_consumes_expires_and_its_nodes_go_away() {
    let mut dws = pool("dws", 0, 2);
    dws.queued = true;
    let d = KubeDouble::start(Options {
        pools: vec![dws],
        booking_time: Some(Duration::from_millis(600)),
        scale_down_after: Some(Duration::from_millis(300)),
        ..Options::default()
    });
    // A ProvisioningRequest made without Kueue (GKE docs, how-to/provisioningrequest).
    let tmpl = json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "ppt"},
        "template": {"spec": {"nodeSelector": {"cloud.google.com/gke-nodepool": "dws"},
            "tolerations": [{"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}});
    let (code, v) = api(&d, "POST", "/api/v1/namespaces/default/podtemplates", Some(&tmpl));
    assert_eq!(code, 201, "{v}");
    let pr = json!({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "metadata": {"name": "pr"},
        "spec": {"provisioningClassName": "queued-provisioning.gke.io", "podSets": [{"podTemplateRef": {"name": "ppt"}, "count": 1}]}});
    let (code, v) = api(
        &d,
        "POST",
        "/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests",
        Some(&pr),
    );
    assert_eq!(code, 201, "{v}");
    until(5, "Provisioned", || {
        provreq_conditions(&d) == ["Accepted", "Provisioned"]
    });
    let node = d.nodes()[0]["metadata"]["name"].as_str().unwrap().to_string();
    // Booked: the empty node stays while the booking lasts.
    std::thread::sleep(Duration::from_millis(400));
    assert!(d.removed_nodes().is_empty(), "{:?}", d.removed_nodes());
    until(5, "the booking expires with no pod on it", || {
        provreq_conditions(&d) == ["Accepted", "Provisioned", "BookingExpired"]
    });
    until(5, "then the node goes", || {
        d.removed_nodes().iter().any(|(n, _)| *n == node)
    });
}
