//! A DOUBLE of a GKE cluster's Kubernetes API server, for tests (GKE itself cannot run
//! here). It speaks the API's real shapes over plain HTTP on 127.0.0.1: discovery,
//! nodes labelled as GKE labels them, pods, exec over the websocket channel protocols
//! (v5/v4: stdin, stdout, stderr, the exit Status, resize, stdin close), logs with
//! follow and timestamps, JobSets (jobset.x-k8s.io/v1alpha2) and Kueue's Workloads
//! (kueue.x-k8s.io/v1beta2), with Kueue's admission played after a delay.
//!
//! A pod "runs" as a local process group: its container's command with its env
//! (values and the fieldRefs Kubernetes resolves), HOME and working directory in a
//! directory of its own, and the directory its image stands for first on PATH (how the
//! double "has" an image's programs). Exec runs in the same way, on a PTY for `tty`.
//! Real kubectl v1.33 accepts it (tests/k8s_double.rs).

#![allow(dead_code)]

mod autoscaler;
mod devices;
mod kubelet;
mod kueue;
mod sched;

#[allow(unused_imports)]
pub use autoscaler::{PoolSpec, Taint};
use kubelet::{create_pod, delete_pod};

use flightdeck::cloud::gke::selector;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;

pub const TOKEN: &str = "double-token";
/// The cluster name the double's GKE API knows.
pub const CLUSTER: &str = "a3u-cluster";
/// The access token the double's OAuth endpoint (`POST /token`) issues for ADC.
pub const ADC_TOKEN: &str = "ya29.k8s-double";

#[derive(Clone, Debug)]
pub enum Provisioning {
    Standard,
    Spot,
    FlexStart,
    Reservation(String),
}

#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub name: String,
    pub pool: String,
    pub machine_type: String,
    pub accelerator: String,
    pub gpus: u32,
    pub provisioning: Provisioning,
    pub internal_ip: String,
}

impl NodeSpec {
    /// The device paths GKE's installers leave on such a node (devices.rs).
    pub fn default_devices(&self) -> Vec<String> {
        devices::defaults(&self.machine_type, self.gpus)
    }
}

#[derive(Clone, Debug, Default)]
pub struct Options {
    pub nodes: Vec<NodeSpec>,
    /// How long Kueue keeps a queued JobSet waiting before it admits it.
    pub admit_after: Duration,
    /// Local queues (name, with a DWS provisioning admission check in front).
    pub queues: Vec<(String, bool)>,
    /// Image-name prefix -> a directory put first on PATH in that image's containers.
    pub images: Vec<(String, PathBuf)>,
    /// Where the nodes' own filesystems are, for the pods' hostPath volumes: node N's is
    /// `DIR/N` where that exists, else `DIR/default`, laid out by the test as Google's
    /// installers lay out a GPU node (`home/kubernetes/bin/nvidia/lib64` with the TCPXO
    /// installer's `nccl-env-profile.sh`, `dev/aperture_devices`, ...). With it, every
    /// container runs in a mount namespace of its own where each hostPath volume it
    /// mounts is bound at its mountPath (kubelet.rs, `host_mounts`), so a guard like
    /// `[ -f /usr/local/nvidia/lib64/nccl-env-profile.sh ]` sees what a real pod sees.
    /// Without it, containers see this machine's filesystem and no hostPath at all.
    pub node_roots: Option<PathBuf>,
    /// Node name -> the device paths it has, instead of its machine type's
    /// ([`NodeSpec::default_devices`]).
    pub node_devices: Vec<(String, Vec<String>)>,
    /// Node pools the cluster autoscaler sizes (autoscaler.rs). A pool named here that
    /// also has `nodes` starts with them; its taints and queued provisioning apply to them.
    pub pools: Vec<PoolSpec>,
    /// How long a scale-up takes until the new nodes are Ready (zero: the next tick).
    pub scale_up_after: Duration,
    /// How long a node must be unneeded before the autoscaler removes it (cluster-autoscaler's
    /// `--scale-down-unneeded-time`, 10 min by default, the default here too).
    pub scale_down_after: Option<Duration>,
    /// How long a Provisioned ProvisioningRequest's capacity is booked for pods to land
    /// (GKE: 10 min, the default here too) before BookingExpired.
    pub booking_time: Option<Duration>,
}

/// One container's output and whether it ended.
#[derive(Default)]
struct Ctr {
    log: Arc<Mutex<Vec<(String, String)>>>,
    ended: Arc<Mutex<bool>>,
}

/// The GKE API's `NodePool` for a pool of `nodes` (the fields
/// projects.locations.clusters.nodePools.list returns that flightdeck reads, with GKE's
/// shapes: `acceleratorCount` an int64 as a string, autoscaling per zone).
fn node_pool_object(pool: &str, nodes: &[NodeSpec]) -> Value {
    let n = nodes.iter().find(|n| n.pool == pool).unwrap();
    pool_object(
        pool,
        &n.machine_type,
        &n.accelerator,
        n.gpus,
        &n.provisioning,
        None,
    )
}

/// The GKE API's `NodePool` for a pool the cluster autoscaler sizes ([`PoolSpec`]).
fn pool_spec_object(p: &PoolSpec) -> Value {
    let mut obj = pool_object(
        &p.name,
        &p.machine_type,
        &p.accelerator,
        p.gpus,
        &p.provisioning,
        Some((p.min_nodes, p.max_nodes)),
    );
    if p.queued {
        obj["queuedProvisioning"] = json!({"enabled": true});
    }
    obj
}

fn pool_object(
    pool: &str,
    machine_type: &str,
    accelerator: &str,
    gpus: u32,
    provisioning: &Provisioning,
    autoscaling: Option<(u32, u32)>,
) -> Value {
    let mut config = json!({"machineType": machine_type, "diskSizeGb": 200, "imageType": "COS_CONTAINERD",
        "accelerators": [{"acceleratorCount": gpus.to_string(), "acceleratorType": accelerator,
                          "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}]});
    let mut pool_obj = json!({"name": pool, "status": "RUNNING", "version": "1.33.5-gke.1000000",
        "initialNodeCount": 0, "locations": ["us-central1-b"]});
    if let Some((min, max)) = autoscaling {
        pool_obj["autoscaling"] =
            json!({"enabled": true, "minNodeCount": min, "maxNodeCount": max, "locationPolicy": "ANY"});
    }
    match provisioning {
        Provisioning::Standard => {}
        Provisioning::Spot => config["spot"] = true.into(),
        Provisioning::FlexStart => {
            config["flexStart"] = true.into();
            pool_obj["autoscaling"] =
                json!({"enabled": true, "minNodeCount": 0, "maxNodeCount": 4, "locationPolicy": "ANY"});
        }
        Provisioning::Reservation(r) => {
            config["reservationAffinity"] = json!({"consumeReservationType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name", "values": [r]})
        }
    }
    pool_obj["config"] = config;
    pool_obj
}

struct PodRec {
    obj: Value,
    /// Per container (init and main), by name.
    ctrs: BTreeMap<String, Ctr>,
    /// Every container has ended (or the pod never ran).
    done: Arc<Mutex<bool>>,
    pgids: Vec<i32>,
    dir: PathBuf,
}

#[derive(Default)]
struct State {
    nodes: Vec<Value>,
    pods: BTreeMap<(String, String), PodRec>,
    jobsets: BTreeMap<(String, String), Value>,
    workloads: BTreeMap<(String, String), Value>,
    /// core/v1 Secrets, by (namespace, name): see [`secret_route`].
    secrets: BTreeMap<(String, String), Value>,
    rv: u64,
    requests: Vec<String>,
    /// Requests that carried the ADC access token.
    adc_requests: usize,
    /// Node name -> the device paths it has.
    node_devices: BTreeMap<String, Vec<String>>,
    /// core/v1 Events (scheduler, kubelet, cluster autoscaler).
    events: Vec<Value>,
    /// The cluster autoscaler's and Kueue's provisioning state.
    autoscaler: autoscaler::AutoscalerState,
    /// provisioningrequests.autoscaling.x-k8s.io objects, by (namespace, name).
    provreqs: BTreeMap<(String, String), Value>,
    /// PodTemplates Kueue made for its ProvisioningRequests, by (namespace, name).
    pod_templates: BTreeMap<(String, String), Value>,
    /// More node pools the GKE API lists (container/v1 `NodePool` objects), beyond those
    /// of the nodes: pools at zero nodes ([`KubeDouble::add_node_pool`]).
    node_pools: Vec<Value>,
    /// DaemonSets in kube-system (apps/v1 objects), as GKE's GPUDirect installers are
    /// ([`KubeDouble::add_daemonset`]).
    daemonsets: Vec<Value>,
}

struct Shared {
    url: String,
    opts: Options,
    state: Mutex<State>,
    dir: PathBuf,
}

pub struct KubeDouble {
    pub url: String,
    pub kubeconfig: PathBuf,
    shared: Arc<Shared>,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now(), true)
}

fn rfc3339(t: SystemTime, nanos: bool) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap();
    let secs = d.as_secs() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil from days (Howard Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    let base = format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
    if nanos {
        format!("{base}.{:09}Z", d.subsec_nanos())
    } else {
        format!("{base}Z")
    }
}

fn ts() -> String {
    rfc3339(SystemTime::now(), false)
}

fn rand5() -> String {
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        ^ std::process::id();
    let mut x = n as u64 ^ 0x9e37_79b9_7f4a_7c15;
    (0..5)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            b"bcdfghjklmnpqrstvwxz2456789"[(x >> 33) as usize % 27] as char
        })
        .collect()
}

fn status(code: u16, reason: &str, message: &str) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code}),
    )
}

/// A Node as GKE registers one: labelled with its pool, machine, accelerator and
/// provisioning; tainted `nvidia.com/gpu=present:NoSchedule` when it has GPUs (GKE docs,
/// "About GPUs in GKE": GPU node pools are tainted so that only pods requesting GPUs land
/// there), with its pool's own taints (`--node-taints`; GKE adds none to spot pools by
/// itself), and on queued-provisioning pools labelled and tainted
/// `cloud.google.com/gke-queued=true:NoSchedule` (GKE docs how-to/provisioningrequest;
/// captured GKE NodePool configs of `queuedProvisioning` pools list that taint). Flex-start
/// nodes without queued provisioning carry the `cloud.google.com/gke-flex-start=true`
/// label and no taint of their own (GKE docs how-to/dws-flex-start-training).
fn node_object(n: &NodeSpec, pool: Option<&PoolSpec>) -> Value {
    let mut labels = json!({
        "kubernetes.io/hostname": n.name,
        "kubernetes.io/os": "linux",
        "cloud.google.com/gke-nodepool": n.pool,
        "node.kubernetes.io/instance-type": n.machine_type,
        "cloud.google.com/gke-accelerator": n.accelerator,
        "cloud.google.com/gke-gpu": "true",
    });
    match &n.provisioning {
        Provisioning::Standard => {}
        Provisioning::Spot => labels["cloud.google.com/gke-spot"] = "true".into(),
        Provisioning::FlexStart => labels["cloud.google.com/gke-flex-start"] = "true".into(),
        Provisioning::Reservation(r) => labels["cloud.google.com/reservation-name"] = r.clone().into(),
    }
    let mut taints = vec![];
    if n.gpus > 0 {
        taints.push(json!({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}));
    }
    if let Some(p) = pool {
        for t in &p.taints {
            taints.push(json!({"key": t.key, "value": t.value, "effect": t.effect}));
        }
        if p.queued {
            labels["cloud.google.com/gke-queued"] = "true".into();
            taints
                .push(json!({"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NoSchedule"}));
        }
    }
    let t = ts();
    json!({
        "kind": "Node", "apiVersion": "v1",
        "metadata": {"name": n.name, "uid": format!("uid-{}", n.name), "resourceVersion": "1", "creationTimestamp": t, "labels": labels},
        "spec": {"taints": taints},
        "status": {
            "capacity": {"cpu": "224", "memory": "2952Gi", "pods": "110", "nvidia.com/gpu": n.gpus.to_string()},
            "allocatable": {"cpu": "220", "memory": "2900Gi", "pods": "110", "nvidia.com/gpu": n.gpus.to_string()},
            "addresses": [{"type": "InternalIP", "address": n.internal_ip}, {"type": "Hostname", "address": n.name}],
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "lastHeartbeatTime": t, "lastTransitionTime": t},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure", "lastHeartbeatTime": t, "lastTransitionTime": t},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID", "lastHeartbeatTime": t, "lastTransitionTime": t},
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": t, "lastTransitionTime": t}
            ],
            "nodeInfo": {"kubeletVersion": "v1.33.5-gke.1000000", "osImage": "Container-Optimized OS from Google", "architecture": "amd64", "operatingSystem": "linux"}
        }
    })
}

impl KubeDouble {
    pub fn start(opts: Options) -> KubeDouble {
        let dir = tempfile::tempdir().unwrap();
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let port = std_listener.local_addr().unwrap().port();
        let url = format!("http://127.0.0.1:{port}");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: double\n  cluster:\n    server: {url}\ncontexts:\n- name: double\n  context:\n    cluster: double\n    user: double\n    namespace: default\ncurrent-context: double\nusers:\n- name: double\n  user:\n    token: {TOKEN}\n"
            ),
        )
        .unwrap();
        let pool = |n: &NodeSpec| opts.pools.iter().find(|p| p.name == n.pool);
        let node_devices = opts
            .nodes
            .iter()
            .map(|n| {
                let d = opts
                    .node_devices
                    .iter()
                    .find(|(m, _)| *m == n.name)
                    .map(|(_, d)| d.clone())
                    .unwrap_or_else(|| n.default_devices());
                (n.name.clone(), d)
            })
            .collect();
        let state = State {
            nodes: opts.nodes.iter().map(|n| node_object(n, pool(n))).collect(),
            node_devices,
            ..State::default()
        };
        let shared = Arc::new(Shared {
            url: url.clone(),
            opts,
            state: Mutex::new(state),
            dir: dir.path().to_path_buf(),
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let s = shared.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = TcpListener::from_std(std_listener).unwrap();
                // The cluster's controllers: kube-scheduler's retries of pending pods,
                // the cluster autoscaler, Kueue's provisioning admission check.
                let c = s.clone();
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        kubelet::schedule_pending(&c);
                        autoscaler::tick(&c);
                        kueue::tick(&c);
                    }
                });
                let serve = async {
                    loop {
                        let Ok((sock, _)) = listener.accept().await else {
                            continue;
                        };
                        let s = s.clone();
                        tokio::spawn(async move {
                            let _ = connection(s, sock).await;
                        });
                    }
                };
                tokio::select! { _ = serve => {}, _ = stopped => {} }
            });
            rt.shutdown_background();
        });
        KubeDouble {
            url,
            kubeconfig,
            shared,
            _dir: dir,
            stop: Some(stop),
        }
    }

    /// How many requests carried the ADC access token (the GKE API's and the cluster's).
    pub fn adc_requests(&self) -> usize {
        self.shared.state.lock().unwrap().adc_requests
    }

    /// `authorized_user` credentials whose token endpoint is this double.
    pub fn adc_credentials(&self) -> Value {
        json!({"type": "authorized_user", "client_id": "double-client", "client_secret": "double-secret",
               "refresh_token": "double-refresh", "token_uri": format!("{}/token", self.url)})
    }

    pub fn requests(&self) -> Vec<String> {
        self.shared.state.lock().unwrap().requests.clone()
    }

    pub fn pods(&self) -> Vec<Value> {
        self.shared
            .state
            .lock()
            .unwrap()
            .pods
            .values()
            .map(|p| p.obj.clone())
            .collect()
    }

    pub fn workloads(&self) -> Vec<Value> {
        self.shared
            .state
            .lock()
            .unwrap()
            .workloads
            .values()
            .cloned()
            .collect()
    }

    pub fn jobsets(&self) -> Vec<Value> {
        self.shared
            .state
            .lock()
            .unwrap()
            .jobsets
            .values()
            .cloned()
            .collect()
    }

    /// The log of the pod's first main container.
    pub fn pod_log(&self, ns: &str, name: &str) -> String {
        let first = {
            let st = self.shared.state.lock().unwrap();
            st.pods
                .get(&(ns.into(), name.into()))
                .and_then(|p| p.obj["spec"]["containers"][0]["name"].as_str().map(String::from))
        };
        first
            .map(|c| self.container_log(ns, name, &c))
            .unwrap_or_default()
    }

    /// The log of one container (init or main) of a pod.
    pub fn container_log(&self, ns: &str, name: &str, container: &str) -> String {
        let st = self.shared.state.lock().unwrap();
        st.pods
            .get(&(ns.into(), name.into()))
            .and_then(|p| p.ctrs.get(container))
            .map(|c| {
                c.log
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|(_, l)| format!("{l}\n"))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every node now (static ones and those the autoscaler added).
    pub fn nodes(&self) -> Vec<Value> {
        self.shared.state.lock().unwrap().nodes.clone()
    }

    /// The events recorded (scheduler, kubelet, cluster autoscaler).
    pub fn events(&self) -> Vec<Value> {
        self.shared.state.lock().unwrap().events.clone()
    }

    /// The ProvisioningRequests Kueue made.
    pub fn provisioning_requests(&self) -> Vec<Value> {
        self.shared
            .state
            .lock()
            .unwrap()
            .provreqs
            .values()
            .cloned()
            .collect()
    }

    /// The nodes the autoscaler removed, with why (scale-down of an unneeded node).
    pub fn removed_nodes(&self) -> Vec<(String, String)> {
        self.shared.state.lock().unwrap().autoscaler.removed.clone()
    }

    /// The nodes the autoscaler would remove but may not, and the pod that blocks each
    /// (cluster-autoscaler's drainability rules).
    pub fn scale_down_blocked(&self) -> BTreeMap<String, String> {
        self.shared.state.lock().unwrap().autoscaler.blocked.clone()
    }

    /// A node pool the GKE API lists besides those of the nodes (one at zero nodes).
    pub fn add_node_pool(&self, pool: Value) {
        self.shared.state.lock().unwrap().node_pools.push(pool);
    }

    /// A DaemonSet in kube-system (apps/v1), as GKE's GPUDirect installers run.
    pub fn add_daemonset(&self, ds: Value) {
        self.shared.state.lock().unwrap().daemonsets.push(ds);
    }

    pub fn set_node_ready(&self, name: &str, ready: bool) {
        let mut st = self.shared.state.lock().unwrap();
        for n in st.nodes.iter_mut().filter(|n| n["metadata"]["name"] == name) {
            for c in n["status"]["conditions"].as_array_mut().unwrap() {
                if c["type"] == "Ready" {
                    c["status"] = if ready { "True" } else { "False" }.into();
                    c["reason"] = if ready { "KubeletReady" } else { "KubeletNotReady" }.into();
                }
            }
            // The node lifecycle controller taints a NotReady node
            // (pkg/controller/nodelifecycle/node_lifecycle_controller.go, TaintNodeNotReady).
            let taints = n["spec"]["taints"].as_array_mut().unwrap();
            taints.retain(|t| t["key"] != "node.kubernetes.io/not-ready");
            if !ready {
                taints.push(json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}));
            }
        }
    }
}

impl Drop for KubeDouble {
    fn drop(&mut self) {
        let st = self.shared.state.lock().unwrap();
        for p in st.pods.values() {
            for &g in &p.pgids {
                unsafe { libc::kill(-g, libc::SIGKILL) };
            }
        }
        drop(st);
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

struct Request {
    method: String,
    path: String,
    query: Vec<(String, String)>,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

impl Request {
    fn q(&self, k: &str) -> Option<&str> {
        self.query.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
    }
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let h = u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap_or(b'?');
                out.push(h);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn read_request(r: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if r.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).await.ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            let k = k.trim().to_ascii_lowercase();
            let v = v.trim().to_string();
            headers
                .entry(k)
                .and_modify(|e: &mut String| {
                    e.push_str(", ");
                    e.push_str(&v)
                })
                .or_insert(v);
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).await.ok()?;
    let (path, q) = target.split_once('?').unwrap_or((&target, ""));
    let query = q
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (unescape(k), unescape(v))
        })
        .collect();
    Some(Request {
        method,
        path: path.to_string(),
        query,
        headers,
        body,
    })
}

async fn respond(w: &mut TcpStream, code: u16, body: &Value) -> std::io::Result<()> {
    let text = serde_json::to_vec(body).unwrap();
    let head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        if code < 300 { "OK" } else { "Error" },
        text.len()
    );
    w.write_all(head.as_bytes()).await?;
    w.write_all(&text).await
}

async fn connection(s: Arc<Shared>, sock: TcpStream) -> std::io::Result<()> {
    let mut r = BufReader::new(sock);
    while let Some(req) = read_request(&mut r).await {
        s.state.lock().unwrap().requests.push(format!(
            "{} {}{}",
            req.method,
            req.path,
            if req.query.is_empty() {
                String::new()
            } else {
                "?…".into()
            }
        ));
        if req.method == "POST" && req.path == "/token" {
            // Google's OAuth token endpoint, for `authorized_user` ADC whose token_uri is here.
            let body = json!({"access_token": ADC_TOKEN, "expires_in": 3599, "token_type": "Bearer"});
            respond(r.get_mut(), 200, &body).await?;
            continue;
        }
        if let Some(auth) = req.headers.get("authorization") {
            if auth == &format!("Bearer {ADC_TOKEN}") {
                s.state.lock().unwrap().adc_requests += 1;
            } else if auth != &format!("Bearer {TOKEN}") {
                let (c, b) = status(401, "Unauthorized", "Unauthorized");
                respond(r.get_mut(), c, &b).await?;
                continue;
            }
        }
        let path = req.path.clone();
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        // Streaming endpoints take the connection.
        if segs.len() == 7
            && segs[0] == "api"
            && segs[2] == "namespaces"
            && segs[4] == "pods"
            && segs[6] == "exec"
        {
            let (ns, pod) = (segs[3].to_string(), segs[5].to_string());
            let sock = r.into_inner();
            return exec(s, sock, req, ns, pod).await;
        }
        if segs.len() == 7
            && segs[0] == "api"
            && segs[2] == "namespaces"
            && segs[4] == "pods"
            && segs[6] == "log"
        {
            let follow = req.q("follow") == Some("true");
            logs(&s, r.get_mut(), &req, segs[3], segs[5], follow).await?;
            if req
                .headers
                .get("connection")
                .is_some_and(|c| c.eq_ignore_ascii_case("close"))
            {
                break;
            }
            continue;
        }
        let (code, body) = route(&s, &req, &segs);
        respond(r.get_mut(), code, &body).await?;
        if req
            .headers
            .get("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"))
        {
            break;
        }
    }
    Ok(())
}

fn resource_list(gv: &str, res: &[(&str, &str, bool, &[&str])]) -> Value {
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": res.iter().map(|(name, kind, ns, short)| json!({
        "name": name, "singularName": "", "namespaced": ns, "kind": kind,
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"], "shortNames": short
    })).collect::<Vec<_>>()})
}

fn list(kind: &str, items: Vec<Value>, rv: u64) -> Value {
    json!({"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": rv.to_string()}, "items": items})
}

fn labels_match(obj: &Value, sel: Option<&str>) -> bool {
    let Some(sel) = sel.filter(|s| !s.is_empty()) else {
        return true;
    };
    let Ok(terms) = selector::parse(sel) else {
        return false;
    };
    let labels: BTreeMap<String, String> = obj["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    selector::matches(&terms, &labels)
}

fn fields_match(obj: &Value, sel: Option<&str>) -> bool {
    let Some(sel) = sel.filter(|s| !s.is_empty()) else {
        return true;
    };
    sel.split(',').all(|t| match t.split_once('=') {
        Some(("spec.nodeName", v)) => obj["spec"]["nodeName"] == v,
        Some(("metadata.name", v)) => obj["metadata"]["name"] == v,
        Some(("status.phase", v)) => obj["status"]["phase"] == v,
        _ => true,
    })
}

fn route(s: &Arc<Shared>, req: &Request, segs: &[&str]) -> (u16, Value) {
    let m = req.method.as_str();
    let mut extra: Option<(u16, Value)> = None;
    if let Some(r) = secret_route(s, m, segs, &req.body) {
        return r;
    }
    match segs {
        // The GKE API's projects.locations.clusters.get: this double is the cluster.
        ["v1", "projects", p, "locations", l, "clusters", c] if *c != CLUSTER => (
            404,
            json!({"error": {
            "code": 404, "message": format!("Not found: projects/{p}/locations/{l}/clusters/{c}."), "status": "NOT_FOUND"}}),
        ),
        ["v1", "projects", p, "locations", l, "clusters", c] => (
            200,
            json!({
                "name": c, "location": l, "selfLink": format!("https://container.googleapis.com/v1/projects/{p}/locations/{l}/clusters/{c}"),
                "endpoint": s.url, "status": "RUNNING", "currentMasterVersion": "1.33.5-gke.1000000", "masterAuth": {}
            }),
        ),
        // projects.locations.clusters.nodePools.list: the pools of the nodes, then the
        // ones at zero the test adds.
        ["v1", "projects", _, "locations", _, "clusters", c, "nodePools"] if *c == CLUSTER => {
            let mut names: Vec<&str> = s.opts.nodes.iter().map(|n| n.pool.as_str()).collect();
            names.dedup();
            names.retain(|n| !s.opts.pools.iter().any(|p| p.name == *n));
            let mut pools: Vec<Value> = names.iter().map(|p| node_pool_object(p, &s.opts.nodes)).collect();
            pools.extend(s.opts.pools.iter().map(pool_spec_object));
            pools.extend(s.state.lock().unwrap().node_pools.iter().cloned());
            (200, json!({"nodePools": pools}))
        }
        ["version"] => (
            200,
            json!({"major": "1", "minor": "33", "gitVersion": "v1.33.5-gke.1000000", "platform": "linux/amd64"}),
        ),
        ["api"] => (
            200,
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}),
        ),
        ["apis"] => (
            200,
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                    {"name": "jobset.x-k8s.io", "versions": [{"groupVersion": "jobset.x-k8s.io/v1alpha2", "version": "v1alpha2"}], "preferredVersion": {"groupVersion": "jobset.x-k8s.io/v1alpha2", "version": "v1alpha2"}},
                {"name": "kueue.x-k8s.io", "versions": [{"groupVersion": "kueue.x-k8s.io/v1beta2", "version": "v1beta2"}], "preferredVersion": {"groupVersion": "kueue.x-k8s.io/v1beta2", "version": "v1beta2"}},
                {"name": "autoscaling.x-k8s.io", "versions": [{"groupVersion": "autoscaling.x-k8s.io/v1", "version": "v1"}], "preferredVersion": {"groupVersion": "autoscaling.x-k8s.io/v1", "version": "v1"}}
            ]}),
        ),
        ["api", "v1"] => (
            200,
            resource_list(
                "v1",
                &[
                    ("nodes", "Node", false, &["no"]),
                    ("pods", "Pod", true, &["po"]),
                    ("pods/exec", "PodExecOptions", true, &[]),
                    ("pods/log", "Pod", true, &[]),
                    ("services", "Service", true, &["svc"]),
                    ("secrets", "Secret", true, &[]),
                    ("namespaces", "Namespace", false, &["ns"]),
                    ("events", "Event", true, &["ev"]),
                    ("podtemplates", "PodTemplate", true, &[]),
                ],
            ),
        ),
        ["apis", "jobset.x-k8s.io", "v1alpha2"] => (
            200,
            resource_list("jobset.x-k8s.io/v1alpha2", &[("jobsets", "JobSet", true, &[])]),
        ),
        ["apis", "kueue.x-k8s.io", "v1beta2"] => (
            200,
            resource_list(
                "kueue.x-k8s.io/v1beta2",
                &[
                    ("workloads", "Workload", true, &["wl"]),
                    ("localqueues", "LocalQueue", true, &["lq"]),
                    ("clusterqueues", "ClusterQueue", false, &["cq"]),
                ],
            ),
        ),
        ["api", "v1", "nodes"] => {
            let st = s.state.lock().unwrap();
            let items = st
                .nodes
                .iter()
                .filter(|n| labels_match(n, req.q("labelSelector")))
                .cloned()
                .collect();
            (200, list("NodeList", items, st.rv))
        }
        ["api", "v1", "nodes", name] => {
            let st = s.state.lock().unwrap();
            match st.nodes.iter().find(|n| n["metadata"]["name"] == *name) {
                Some(n) => (200, n.clone()),
                None => status(404, "NotFound", &format!("nodes \"{name}\" not found")),
            }
        }
        ["api", "v1", "pods"] => {
            let st = s.state.lock().unwrap();
            let items = st
                .pods
                .values()
                .map(|p| p.obj.clone())
                .filter(|p| {
                    labels_match(p, req.q("labelSelector")) && fields_match(p, req.q("fieldSelector"))
                })
                .collect();
            (200, list("PodList", items, st.rv))
        }
        ["api", "v1", "namespaces", ns] => (
            200,
            json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": ns}, "status": {"phase": "Active"}}),
        ),
        ["api", "v1", "namespaces", ns, "pods"] if m == "GET" => {
            let st = s.state.lock().unwrap();
            let items = st
                .pods
                .iter()
                .filter(|((n, _), _)| n == ns)
                .map(|(_, p)| p.obj.clone())
                .filter(|p| {
                    labels_match(p, req.q("labelSelector")) && fields_match(p, req.q("fieldSelector"))
                })
                .collect();
            (200, list("PodList", items, st.rv))
        }
        ["api", "v1", "namespaces", ns, "pods"] if m == "POST" => {
            match serde_json::from_slice::<Value>(&req.body) {
                Ok(mut pod) => {
                    pod["metadata"]["namespace"] = (*ns).into();
                    create_pod(s, pod)
                }
                Err(e) => status(400, "BadRequest", &e.to_string()),
            }
        }
        ["api", "v1", "namespaces", ns, "pods", name] if m == "GET" => {
            let st = s.state.lock().unwrap();
            match st.pods.get(&(ns.to_string(), name.to_string())) {
                Some(p) => (200, p.obj.clone()),
                None => status(404, "NotFound", &format!("pods \"{name}\" not found")),
            }
        }
        ["api", "v1", "namespaces", ns, "pods", name] if m == "DELETE" => match delete_pod(s, ns, name) {
            Some(obj) => (200, obj),
            None => status(404, "NotFound", &format!("pods \"{name}\" not found")),
        },
        // apps/v1 DaemonSets in kube-system: GKE's GPUDirect installers, as the test
        // adds them (KubeDouble::add_daemonset).
        ["apis", "apps", "v1", "namespaces", "kube-system", "daemonsets"] if m == "GET" => {
            let st = s.state.lock().unwrap();
            (200, list("DaemonSetList", st.daemonsets.clone(), st.rv))
        }
        ["api", "v1", "namespaces", _, "services"] if m == "POST" => {
            (201, serde_json::from_slice(&req.body).unwrap_or(json!({})))
        }
        ["apis", "jobset.x-k8s.io", "v1alpha2", "namespaces", ns, "jobsets"] if m == "GET" => {
            let st = s.state.lock().unwrap();
            let items = st
                .jobsets
                .iter()
                .filter(|((n, _), j)| n == ns && labels_match(j, req.q("labelSelector")))
                .map(|(_, j)| j.clone())
                .collect();
            (200, list("JobSetList", items, st.rv))
        }
        ["apis", "jobset.x-k8s.io", "v1alpha2", "namespaces", ns, "jobsets"] if m == "POST" => {
            match serde_json::from_slice::<Value>(&req.body) {
                Ok(mut js) => {
                    js["metadata"]["namespace"] = (*ns).into();
                    create_jobset(s, js)
                }
                Err(e) => status(400, "BadRequest", &e.to_string()),
            }
        }
        ["apis", "jobset.x-k8s.io", "v1alpha2", "namespaces", ns, "jobsets", name] if m == "GET" => {
            let st = s.state.lock().unwrap();
            match st.jobsets.get(&(ns.to_string(), name.to_string())) {
                Some(j) => (200, j.clone()),
                None => status(
                    404,
                    "NotFound",
                    &format!("jobsets.jobset.x-k8s.io \"{name}\" not found"),
                ),
            }
        }
        ["apis", "jobset.x-k8s.io", "v1alpha2", "namespaces", ns, "jobsets", name] if m == "DELETE" => {
            let removed = s
                .state
                .lock()
                .unwrap()
                .jobsets
                .remove(&(ns.to_string(), name.to_string()));
            match removed {
                Some(j) => {
                    let pods: Vec<String> = s
                        .state
                        .lock()
                        .unwrap()
                        .pods
                        .iter()
                        .filter(|((n, _), p)| {
                            n == ns && p.obj["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == *name
                        })
                        .map(|((_, p), _)| p.clone())
                        .collect();
                    for p in pods {
                        delete_pod(s, ns, &p);
                    }
                    s.state
                        .lock()
                        .unwrap()
                        .workloads
                        .retain(|_, w| w["metadata"]["ownerReferences"][0]["name"] != *name);
                    (200, j)
                }
                None => status(
                    404,
                    "NotFound",
                    &format!("jobsets.jobset.x-k8s.io \"{name}\" not found"),
                ),
            }
        }
        ["apis", "kueue.x-k8s.io", "v1beta2", "namespaces", ns, "workloads"] => {
            let st = s.state.lock().unwrap();
            let items = st
                .workloads
                .iter()
                .filter(|((n, _), _)| n == ns)
                .map(|(_, w)| w.clone())
                .collect();
            (200, list("WorkloadList", items, st.rv))
        }
        ["apis", "kueue.x-k8s.io", "v1beta2", "namespaces", ns, "localqueues"] => {
            let st = s.state.lock().unwrap();
            let count = |q: &str, admitted: bool| {
                st.workloads
                    .values()
                    .filter(|w| w["spec"]["queueName"] == q)
                    .filter(|w| {
                        let c = w["status"]["conditions"].as_array().cloned().unwrap_or_default();
                        let is = |t: &str| c.iter().any(|c| c["type"] == t && c["status"] == "True");
                        !is("Finished") && is("Admitted") == admitted
                    })
                    .count()
            };
            let items = s.opts.queues.iter().map(|(q, _)| json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": q, "namespace": ns},
                "spec": {"clusterQueue": format!("cq-{q}")}, "status": {"pendingWorkloads": count(q, false), "admittedWorkloads": count(q, true)}})).collect();
            (200, list("LocalQueueList", items, 1))
        }
        _ if segs.first() == Some(&"openapi") => status(404, "NotFound", "the double serves no OpenAPI"),
        // The routes of the submodules (ProvisioningRequests, PodTemplates, Events).
        _ if {
            let mut st = s.state.lock().unwrap();
            kueue::route(&mut st, m, segs, &req.body)
                .or_else(|| kubelet::events_route(&st, m, segs, req.q("fieldSelector")))
                .map(|r| extra = Some(r))
                .is_some()
        } =>
        {
            extra.take().unwrap()
        }
        _ => status(
            404,
            "NotFound",
            &format!(
                "the server could not find the requested resource ({} /{})",
                m,
                segs.join("/")
            ),
        ),
    }
}

fn create_jobset(s: &Arc<Shared>, mut js: Value) -> (u16, Value) {
    let ns = js["metadata"]["namespace"].as_str().unwrap().to_string();
    let name = js["metadata"]["name"].as_str().unwrap_or("").to_string();
    let queue = js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
        .as_str()
        .map(String::from);
    let mut st = s.state.lock().unwrap();
    if st.jobsets.contains_key(&(ns.clone(), name.clone())) {
        return status(
            409,
            "AlreadyExists",
            &format!("jobsets.jobset.x-k8s.io \"{name}\" already exists"),
        );
    }
    st.rv += 1;
    js["metadata"]["uid"] = format!("uid-js-{name}").into();
    js["metadata"]["creationTimestamp"] = ts().into();
    js["status"] = json!({"conditions": []});
    if let Some(q) = &queue {
        kueue::on_create(s, &mut st, &mut js, q);
        st.jobsets.insert((ns.clone(), name.clone()), js.clone());
        return (201, js);
    }
    st.jobsets.insert((ns.clone(), name.clone()), js.clone());
    drop(st);
    // A suspended JobSet makes no Jobs, hence no pods (JobSet
    // pkg/controller/jobset_controller.go: suspend is passed to every child Job, and a
    // suspended Job creates no pods: kubernetes pkg/controller/job/job_controller.go).
    if js["spec"]["suspend"] != true {
        start_jobset(s, &ns, &name);
    }
    (201, js)
}

/// The JobSet's pods: per replicated job, `parallelism` indexed pods.
fn start_jobset(s: &Arc<Shared>, ns: &str, name: &str) {
    let js = s
        .state
        .lock()
        .unwrap()
        .jobsets
        .get(&(ns.to_string(), name.to_string()))
        .cloned();
    let Some(js) = js else { return };
    for rj in js["spec"]["replicatedJobs"].as_array().into_iter().flatten() {
        let rjn = rj["name"].as_str().unwrap_or("rj");
        let par = rj["template"]["spec"]["parallelism"].as_u64().unwrap_or(1);
        for i in 0..par {
            let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": rj["template"]["spec"]["template"]["metadata"].clone(), "spec": rj["template"]["spec"]["template"]["spec"].clone()});
            if !pod["metadata"]["labels"].is_object() {
                pod["metadata"]["labels"] = json!({});
            }
            if !pod["metadata"]["annotations"].is_object() {
                pod["metadata"]["annotations"] = json!({});
            }
            for (k, v) in [
                ("jobset.sigs.k8s.io/jobset-name", name.to_string()),
                ("jobset.sigs.k8s.io/replicatedjob-name", rjn.to_string()),
                ("batch.kubernetes.io/job-completion-index", i.to_string()),
                ("jobset.sigs.k8s.io/job-index", "0".into()),
            ] {
                pod["metadata"]["labels"][k] = v.clone().into();
                pod["metadata"]["annotations"][k] = v.into();
            }
            // The pods belong to the replicated job's Job (its controller).
            pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
                "name": format!("{name}-{rjn}-0"), "uid": format!("uid-job-{name}-{rjn}-0"), "controller": true, "blockOwnerDeletion": true}]);
            // JobSet's pod webhook (pkg/webhooks/pod_mutating_webhook.go, setNodeSelector):
            // with `alpha.jobset.sigs.k8s.io/exclusive-topology` on the replicated job,
            // the leader (completion index 0) is placed and every follower of the same
            // Job gets a nodeSelector on the topology key with the leader's node's value.
            if let Some(key) = rj["template"]["metadata"]["annotations"]
                ["alpha.jobset.sigs.k8s.io/exclusive-topology"]
                .as_str()
            {
                if i > 0 {
                    let st = s.state.lock().unwrap();
                    let leader = st.pods.values().find(|p| {
                        p.obj["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == name
                            && p.obj["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "0"
                    });
                    let value = leader
                        .and_then(|p| {
                            st.nodes
                                .iter()
                                .find(|n| n["metadata"]["name"] == p.obj["spec"]["nodeName"])
                        })
                        .map(|n| n["metadata"]["labels"][key].clone())
                        .unwrap_or(Value::Null);
                    if !pod["spec"]["nodeSelector"].is_object() {
                        pod["spec"]["nodeSelector"] = json!({});
                    }
                    pod["spec"]["nodeSelector"][key] = value;
                }
            }
            pod["metadata"]["name"] = format!("{name}-{rjn}-0-{i}-{}", rand5()).into();
            pod["metadata"]["namespace"] = ns.into();
            pod["spec"]["hostname"] = format!("{name}-{rjn}-0-{i}").into();
            pod["spec"]["subdomain"] = name.into();
            if let Some(cs) = pod["spec"]["containers"].as_array_mut() {
                for c in cs {
                    if !c["env"].is_array() {
                        c["env"] = json!([]);
                    }
                    c["env"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!({"name": "JOB_COMPLETION_INDEX", "value": i.to_string()}));
                }
            }
            create_pod(s, pod);
        }
    }
}

/// JobSets whose pods all ended: Completed or Failed, and their workloads Finished.
fn settle_jobsets(s: &Arc<Shared>) {
    let mut st = s.state.lock().unwrap();
    let keys: Vec<(String, String)> = st.jobsets.keys().cloned().collect();
    for (ns, name) in keys {
        let js = &st.jobsets[&(ns.clone(), name.clone())];
        if js["spec"]["suspend"] == true || js["status"]["terminalState"].is_string() {
            continue;
        }
        let want: u64 = js["spec"]["replicatedJobs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|rj| rj["template"]["spec"]["parallelism"].as_u64().unwrap_or(1))
            .sum();
        let phases: Vec<String> = st
            .pods
            .iter()
            .filter(|((n, _), p)| {
                *n == ns && p.obj["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == name.as_str()
            })
            .map(|(_, p)| p.obj["status"]["phase"].as_str().unwrap_or("").to_string())
            .collect();
        let failed = phases.iter().any(|p| p == "Failed");
        let complete = phases.len() as u64 == want && phases.iter().all(|p| p == "Succeeded");
        if !(failed || complete) {
            continue;
        }
        let t = ts();
        let (ty, reason) = if failed {
            ("Failed", "FailedJobs")
        } else {
            ("Completed", "AllJobsCompleted")
        };
        let js = st.jobsets.get_mut(&(ns.clone(), name.clone())).unwrap();
        js["status"]["terminalState"] = ty.into();
        js["status"]["conditions"] =
            json!([{"type": ty, "status": "True", "reason": reason, "lastTransitionTime": t}]);
        for w in st
            .workloads
            .values_mut()
            .filter(|w| w["metadata"]["ownerReferences"][0]["name"] == name.as_str())
        {
            w["status"]["conditions"].as_array_mut().unwrap().push(json!({"type": "Finished", "status": "True", "reason": if failed { "Failed" } else { "Succeeded" }, "message": "Job finished", "lastTransitionTime": t}));
        }
    }
}

async fn logs(
    s: &Arc<Shared>,
    w: &mut TcpStream,
    req: &Request,
    ns: &str,
    name: &str,
    follow: bool,
) -> std::io::Result<()> {
    let rec = {
        let st = s.state.lock().unwrap();
        st.pods.get(&(ns.to_string(), name.to_string())).map(|p| {
            (
                p.obj.clone(),
                p.ctrs
                    .iter()
                    .map(|(k, c)| (k.clone(), c.log.clone(), c.ended.clone()))
                    .collect::<Vec<_>>(),
            )
        })
    };
    let Some((pod, ctrs)) = rec else {
        let (c, b) = status(404, "NotFound", &format!("pods \"{name}\" not found"));
        return respond(w, c, &b).await;
    };
    let c = match kubelet::pick_container(&pod, req.q("container")) {
        Ok(c) => c,
        Err(m) => {
            let (c, b) = status(400, "BadRequest", &m);
            return respond(w, c, &b).await;
        }
    };
    let cname = c["name"].as_str().unwrap_or("").to_string();
    // A container not started yet has no log (the kubelet's "waiting to start").
    let waiting = ["initContainerStatuses", "containerStatuses"]
        .iter()
        .find_map(|k| {
            pod["status"][k]
                .as_array()
                .into_iter()
                .flatten()
                .find(|cs| cs["name"] == cname.as_str())
                .and_then(|cs| cs["state"]["waiting"]["reason"].as_str().map(String::from))
        });
    let not_started =
        pod["status"]["containerStatuses"].is_null() && pod["status"]["initContainerStatuses"].is_null();
    if let Some(reason) = waiting.or(not_started.then(|| "ContainerCreating".to_string())) {
        let (c, b) = status(
            400,
            "BadRequest",
            &format!("container \"{cname}\" in pod \"{name}\" is waiting to start: {reason}"),
        );
        return respond(w, c, &b).await;
    }
    let (_, log, done) = ctrs.into_iter().find(|(k, _, _)| *k == cname).unwrap();
    let stamps = req.q("timestamps") == Some("true");
    // sinceTime has second precision, as the API's.
    let since = req.q("sinceTime").map(|t| t.trim_end_matches('Z').to_string());
    w.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n")
        .await?;
    let mut at = 0;
    loop {
        let (chunk, ended) = {
            let g = log.lock().unwrap();
            let mut out = String::new();
            for (t, l) in &g[at..] {
                if since.as_deref().is_some_and(|s| &t[..19] < s) {
                    continue;
                }
                if stamps {
                    out.push_str(t);
                    out.push(' ');
                }
                out.push_str(l);
                out.push('\n');
            }
            at = g.len();
            (out, *done.lock().unwrap())
        };
        if !chunk.is_empty() {
            w.write_all(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes())
                .await?;
        }
        if !follow || ended {
            // One more look after the end, for lines written as it ended.
            if follow && ended && at < log.lock().unwrap().len() {
                continue;
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    w.write_all(b"0\r\n\r\n").await
}

async fn exec(
    s: Arc<Shared>,
    mut sock: TcpStream,
    req: Request,
    ns: String,
    name: String,
) -> std::io::Result<()> {
    let offered = req
        .headers
        .get("sec-websocket-protocol")
        .cloned()
        .unwrap_or_default();
    let protos: Vec<&str> = offered.split(',').map(str::trim).collect();
    let proto = ["v5.channel.k8s.io", "v4.channel.k8s.io"]
        .into_iter()
        .find(|p| protos.contains(p));
    let (Some(key), Some(proto)) = (req.headers.get("sec-websocket-key"), proto) else {
        let (c, b) = status(
            400,
            "BadRequest",
            "exec needs a websocket upgrade with v5.channel.k8s.io or v4.channel.k8s.io",
        );
        return respond(&mut sock, c, &b).await;
    };
    let accept = {
        use sha1::Digest;
        let mut h = sha1::Sha1::new();
        h.update(key.as_bytes());
        h.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
        data_encoding::BASE64.encode(&h.finalize())
    };
    sock.write_all(format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: {proto}\r\n\r\n").as_bytes()).await?;
    let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(sock, Role::Server, None).await;
    let (mut tx, mut rx) = ws.split();
    let argv: Vec<String> = req
        .query
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    let tty = req.q("tty") == Some("true");
    let pod = {
        let st = s.state.lock().unwrap();
        st.pods
            .get(&(ns.clone(), name.clone()))
            .map(|p| (p.obj.clone(), p.dir.clone()))
    };
    let ctr = pod
        .as_ref()
        .map(|(p, _)| kubelet::pick_container(p, req.q("container")));
    let fail =
        |msg: String| json!({"metadata": {}, "status": "Failure", "message": msg, "reason": "InternalError"});
    let send_status = |v: Value| {
        let mut b = vec![3u8];
        b.extend(serde_json::to_vec(&v).unwrap());
        Message::binary(b)
    };
    let Some((pod, dir)) = pod.filter(|(p, _)| p["status"]["phase"] == "Running") else {
        let _ = tx
            .send(send_status(fail(format!("pod {name} is not running"))))
            .await;
        let _ = tx.send(normal_close()).await;
        return Ok(());
    };
    let ctr = match ctr {
        Some(Ok(c)) => c,
        Some(Err(m)) => {
            let _ = tx.send(send_status(fail(m))).await;
            let _ = tx.send(normal_close()).await;
            return Ok(());
        }
        None => json!({}),
    };
    if argv.is_empty() {
        let _ = tx.send(send_status(fail("no command".into()))).await;
        return Ok(());
    }
    let (otx, mut orx) = tokio::sync::mpsc::channel::<(u8, Vec<u8>)>(64);
    let code: i32;
    if tty {
        let mut envs: Vec<String> = kubelet::container_env(&s, &pod, &ctr, &dir)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        envs.push("TERM=xterm-256color".into());
        let mut args: Vec<&str> = vec!["-i"];
        args.extend(envs.iter().map(String::as_str));
        args.extend(argv.iter().map(String::as_str));
        let (pty, mut child) = flightdeck::node::pty::spawn("env", &args, 80, 24).unwrap();
        let pty = Arc::new(pty);
        let p2 = pty.clone();
        let o2 = otx.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 8192];
            while let Ok(n) = p2.read(&mut buf).await {
                if n == 0 || o2.send((1, buf[..n].to_vec())).await.is_err() {
                    break;
                }
            }
        });
        drop(otx);
        let cpid = child.id().map(|i| i as i32);
        let mut exit = Box::pin(child.wait());
        code = loop {
            tokio::select! {
                m = rx.next() => match m {
                    Some(Ok(Message::Binary(b))) if !b.is_empty() => match b[0] {
                        0 => { let _ = pty.write_all(&b[1..]).await; }
                        4 => if let Ok(v) = serde_json::from_slice::<Value>(&b[1..]) {
                            let _ = pty.resize(v["Width"].as_u64().unwrap_or(80) as u16, v["Height"].as_u64().unwrap_or(24) as u16);
                        },
                        _ => {}
                    },
                    Some(Ok(_)) => {}
                    _ => { if let Some(pid) = cpid { unsafe { libc::kill(-pid, libc::SIGHUP) }; } break 129; }
                },
                Some((ch, data)) = orx.recv() => { let mut m = vec![ch]; m.extend(data); let _ = tx.send(Message::binary(m)).await; }
                st = &mut exit => break st.ok().and_then(|s| s.code()).unwrap_or(129),
            }
        };
        while let Ok(Some((ch, data))) = tokio::time::timeout(Duration::from_millis(100), orx.recv()).await {
            let mut m = vec![ch];
            m.extend(data);
            let _ = tx.send(Message::binary(m)).await;
        }
    } else {
        let mut c = kubelet::command(&s, &pod, &ctr, &dir, &argv);
        c.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = match c.spawn() {
            Ok(c) => c,
            Err(e) => {
                let _ = tx.send(send_status(fail(format!("exec: {e}")))).await;
                return Ok(());
            }
        };
        let pgid = child.id().map(|i| i as i32);
        let mut stdin = child.stdin.take();
        for (chn, r) in [
            (
                1u8,
                Box::new(child.stdout.take().unwrap()) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
            ),
            (2, Box::new(child.stderr.take().unwrap())),
        ] {
            let o = otx.clone();
            tokio::spawn(async move {
                let mut r = r;
                let mut buf = vec![0u8; 16384];
                while let Ok(n) = r.read(&mut buf).await {
                    if n == 0 || o.send((chn, buf[..n].to_vec())).await.is_err() {
                        break;
                    }
                }
            });
        }
        drop(otx);
        loop {
            tokio::select! {
                m = rx.next() => match m {
                    Some(Ok(Message::Binary(b))) if !b.is_empty() => match b[0] {
                        0 => if let Some(i) = stdin.as_mut() { let _ = i.write_all(&b[1..]).await; },
                        255 if b.get(1) == Some(&0) => { stdin = None; }
                        _ => {}
                    },
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => { if let Some(g) = pgid { unsafe { libc::kill(-g, libc::SIGKILL) }; } break; }
                    Some(Ok(_)) => {}
                },
                o = orx.recv() => match o {
                    Some((ch, data)) => { let mut m = vec![ch]; m.extend(data); if tx.send(Message::binary(m)).await.is_err() { break; } }
                    None => break,
                },
            }
        }
        code = child.wait().await.ok().and_then(|s| s.code()).unwrap_or(137);
    }
    let st = if code == 0 {
        json!({"metadata": {}, "status": "Success"})
    } else {
        json!({"metadata": {}, "status": "Failure", "message": format!("command terminated with non-zero exit code: exit code {code}"), "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]}})
    };
    let _ = tx.send(send_status(st)).await;
    let _ = tx.send(normal_close()).await;
    Ok(())
}

/// A websocket Close with code 1000, as the API server ends an exec stream (clients
/// read any other as an error).
fn normal_close() -> Message {
    use tokio_tungstenite::tungstenite::protocol::frame::{coding::CloseCode, CloseFrame};
    Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    }))
}

// ---- core/v1 Secrets ------------------------------------------------------------------

impl KubeDouble {
    /// The stored Secrets (their `data` base64, as the API returns them).
    pub fn secrets(&self) -> Vec<Value> {
        self.shared
            .state
            .lock()
            .unwrap()
            .secrets
            .values()
            .cloned()
            .collect()
    }
}

/// Whether `k` is a valid Secret data key: kubernetes/kubernetes
/// pkg/apis/core/validation/validation.go `ValidateSecret` takes data keys by
/// staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go
/// `IsConfigMapKey`: `[-._a-zA-Z0-9]+`, at most 253.
fn secret_key_valid(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 253
        && k != "."
        && k != ".."
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
}

/// create/get/delete of core/v1 Secrets in a namespace; None for any other path.
fn secret_route(s: &Arc<Shared>, m: &str, segs: &[&str], body: &[u8]) -> Option<(u16, Value)> {
    use data_encoding::BASE64;
    let gone = |name: &str| status(404, "NotFound", &format!("secrets \"{name}\" not found"));
    Some(match segs {
        ["api", "v1", "namespaces", ns, "secrets"] if m == "POST" => {
            let mut sec: Value = match serde_json::from_slice(body) {
                Ok(v) => v,
                Err(e) => return Some(status(400, "BadRequest", &e.to_string())),
            };
            let name = sec["metadata"]["name"].as_str().unwrap_or("").to_string();
            // ValidateSecret: the name is a DNS subdomain (ValidateObjectMeta with
            // ValidateSecretName).
            let dns = !name.is_empty()
                && name.len() <= 253
                && name
                    .split('.')
                    .all(|l| !l.is_empty() && !l.starts_with('-') && !l.ends_with('-'))
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'));
            if !dns {
                return Some(status(
                    422,
                    "Invalid",
                    &format!("Secret \"{name}\" is invalid: metadata.name: Invalid value"),
                ));
            }
            // stringData is write-only: merged into data, over data's keys
            // (pkg/apis/core/v1/conversion.go Convert_v1_Secret_To_core_Secret).
            let mut data = sec["data"].as_object().cloned().unwrap_or_default();
            for (k, v) in sec["stringData"].as_object().cloned().unwrap_or_default() {
                data.insert(k, BASE64.encode(v.as_str().unwrap_or("").as_bytes()).into());
            }
            let mut size = 0;
            for (k, v) in &data {
                if !secret_key_valid(k) {
                    return Some(status(422, "Invalid", &format!("Secret \"{name}\" is invalid: data[{k}]: Invalid value: \"{k}\": a valid config key must consist of alphanumeric characters, '-', '_' or '.'")));
                }
                match v.as_str().map(|b| BASE64.decode(b.as_bytes())) {
                    Some(Ok(b)) => size += b.len(),
                    _ => {
                        return Some(status(
                            400,
                            "BadRequest",
                            &format!("Secret.data[{k}]: illegal base64 data"),
                        ))
                    }
                }
            }
            // MaxSecretSize (pkg/apis/core/types.go): 1 MiB.
            if size > 1024 * 1024 {
                return Some(status(
                    422,
                    "Invalid",
                    &format!("Secret \"{name}\" is invalid: data: Too long: must have at most 1048576 bytes"),
                ));
            }
            let mut st = s.state.lock().unwrap();
            let key = (ns.to_string(), name.clone());
            if st.secrets.contains_key(&key) {
                return Some(status(
                    409,
                    "AlreadyExists",
                    &format!("secrets \"{name}\" already exists"),
                ));
            }
            st.rv += 1;
            sec["metadata"]["namespace"] = (*ns).into();
            sec["metadata"]["uid"] = format!("uid-secret-{name}-{}", st.rv).into();
            sec["metadata"]["resourceVersion"] = st.rv.to_string().into();
            sec["metadata"]["creationTimestamp"] = ts().into();
            sec["data"] = Value::Object(data);
            if let Some(o) = sec.as_object_mut() {
                o.remove("stringData");
            }
            if !sec["type"].is_string() {
                sec["type"] = "Opaque".into();
            }
            st.secrets.insert(key, sec.clone());
            (201, sec)
        }
        ["api", "v1", "namespaces", ns, "secrets", name] if m == "GET" => {
            match s
                .state
                .lock()
                .unwrap()
                .secrets
                .get(&(ns.to_string(), name.to_string()))
            {
                Some(v) => (200, v.clone()),
                None => gone(name),
            }
        }
        ["api", "v1", "namespaces", ns, "secrets", name] if m == "DELETE" => {
            match s
                .state
                .lock()
                .unwrap()
                .secrets
                .remove(&(ns.to_string(), name.to_string()))
            {
                Some(v) => (200, v),
                None => gone(name),
            }
        }
        _ => return None,
    })
}

type Vars = Vec<(String, String)>;

/// A container's envFrom secretRefs (prefix + key = value, keys that are no
/// variable name skipped) and its env secretKeyRefs (name, value), as the kubelet
/// resolves them (pkg/kubelet/kubelet_pods.go `makeEnvironmentVariables`); an error
/// where a Secret or key that is not `optional` is missing.
fn secret_env(s: &Shared, pod: &Value, c: &Value) -> Result<(Vars, Vars), String> {
    use data_encoding::BASE64;
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or("default");
    let st = s.state.lock().unwrap();
    let get = |name: &str| st.secrets.get(&(ns.to_string(), name.to_string()));
    let decode = |v: &Value| {
        v.as_str()
            .and_then(|b| BASE64.decode(b.as_bytes()).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let mut from = vec![];
    for f in c["envFrom"].as_array().into_iter().flatten() {
        let Some(name) = f["secretRef"]["name"].as_str() else {
            continue;
        };
        let prefix = f["prefix"].as_str().unwrap_or("");
        match get(name) {
            Some(sec) => {
                for (k, v) in sec["data"].as_object().into_iter().flatten() {
                    let var = format!("{prefix}{k}");
                    let ok = var
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                        && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                    if ok {
                        from.push((var, decode(v)));
                    }
                }
            }
            None if f["secretRef"]["optional"] == true => {}
            None => return Err(format!("secret \"{name}\" not found")),
        }
    }
    let mut refs = vec![];
    for e in c["env"].as_array().into_iter().flatten() {
        let r = &e["valueFrom"]["secretKeyRef"];
        let (Some(name), Some(key)) = (r["name"].as_str(), r["key"].as_str()) else {
            continue;
        };
        let value = get(name).and_then(|sec| sec["data"].get(key).map(decode));
        match value {
            Some(v) => refs.push((e["name"].as_str().unwrap_or("").to_string(), v)),
            None if r["optional"] == true => {}
            None if get(name).is_none() => return Err(format!("secret \"{name}\" not found")),
            None => return Err(format!("couldn't find key {key} in Secret {ns}/{name}")),
        }
    }
    Ok((from, refs))
}
