//! The pod launcher: nccl-tests on a GKE fleet, as Google's GKE GPUDirect guides run
//! them. One test pod per node (the flavour's image, its network annotations and GPUs:
//! [`crate::cloud::gke::nccl::recipe`]), then the image's own run script detached on the
//! first pod, naming every pod; its nccl-tests output is followed and judged like a VM
//! run's (same parser, chart, verdict and history), and the pods are removed when the
//! run has been followed to its end ([`PodLauncher::cleanup`]).
//!
//! The images' scripts set their flavour's NCCL environment themselves; flightdeck adds
//! only environment lines the operator edited (which start from the GKE profile,
//! [`super::profile::pod_env`], never a VM's).

use super::history;
use super::launcher::{Progress, RunLauncher, Start, Started};
use super::remote;
use super::runner::{self, RunSpec};
use super::{profile, GpuDirect};
use crate::cloud::gke::exec::{pod_phase, wait_running};
use crate::cloud::gke::jobs::{create_jobset, jobset_resource};
use crate::cloud::gke::nccl::{
    delete_run_pods, machine, pod_name, recipe, rxdm_parts, shared_memory, RUN_LABEL,
};
use crate::cloud::gke::{self, object_name, Clients, KubeNode, FLEET_LABEL, MANAGED_BY, ROLE_LABEL};
use crate::fleet::NodeTarget;
use crate::reach::Reach;
use crate::ssh::client::BoxFuture;
use crate::store::RunRecord;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// The test pods' container.
pub const CONTAINER: &str = "nccl";
/// How long test pods may take to run once they are on their nodes (a multi-GB image
/// pull); the wait for admission and for nodes has no limit (`wait_scheduled_with`).
const POD_START: Duration = Duration::from_secs(600);

/// The [`RunLauncher`] of GKE fleets: test pods per node.
pub struct PodLauncher;

impl RunLauncher for PodLauncher {
    fn start<'a>(
        &'a self,
        state_dir: &'a Path,
        s: &'a Start,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, anyhow::Result<Started>> {
        Box::pin(async move { start(state_dir, s, progress).await.map_err(anyhow::Error::msg) })
    }

    /// The recorded nodes, each reached in the test pod the run ran in.
    fn heads(&self, run: &RunRecord, fleet_nodes: &[NodeTarget]) -> Vec<NodeTarget> {
        run.nodes
            .iter()
            .filter_map(|rn| {
                let mut n = fleet_nodes.iter().find(|n| n.index == rn.node).cloned()?;
                if let (Some(k), Some(pod)) = (n.kube_mut(), &rn.pod) {
                    k.pod = Some(pod.clone());
                    k.container = Some(CONTAINER.into());
                }
                Some(n)
            })
            .collect()
    }

    fn leaves(&self) -> Option<&'static str> {
        Some("its pods")
    }

    /// Remove the run's test pods, when its head is one.
    fn cleanup<'a>(
        &'a self,
        reach: &'a Reach,
        id: &'a str,
        heads: &'a [NodeTarget],
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        Box::pin(async move {
            let Some(k) = heads.first().and_then(|n| n.kube()).filter(|k| k.pod.is_some()) else {
                return Ok(None);
            };
            match remove_run(reach.kube(), k, id).await {
                Ok(n) => Ok(Some(format!("removed {}", crate::words::plural(n, "test pod")))),
                Err(e) => Err(format!(
                    "the run's test pods were not removed ({e}); `flightdeck fleet delete` or `fleet gc` removes them"
                )),
            }
        })
    }
}

/// The test pods' shape, without a name, namespace or node: the flavour's recipe
/// (image, network annotations, host mounts, `/dev/shm`, the RxDM sidecar), the image's
/// SSH daemon (the run script reaches the other pods through it, as mpirun does) and the
/// run's labels. Pinned pods ([`test_pod`]) and the scheduled JobSet ([`test_jobset`])
/// are both made from it.
pub fn pod_template(
    fleet: &str,
    run: &str,
    flavour: GpuDirect,
    gpus: u32,
    networks: Option<&[String]>,
) -> Result<serde_json::Value, String> {
    let r = recipe(flavour);
    let mut annotations = serde_json::Map::new();
    // The fleet file's `gke.networks`, else the guides' networks, as a job's pods
    // (crate::jobs::jobset::with_gpudirect_on).
    if let Some(i) = crate::cloud::gke::nccl::interfaces(flavour, networks)? {
        annotations.insert("networking.gke.io/default-interface".into(), "eth0".into());
        annotations.insert("networking.gke.io/interfaces".into(), i.into());
    }
    let mut volumes: Vec<serde_json::Value> = r
        .mounts
        .iter()
        .enumerate()
        .map(|(i, (host, _))| serde_json::json!({"name": format!("host-{i}"), "hostPath": {"path": host}}))
        .collect();
    let mut mounts: Vec<serde_json::Value> = r
        .mounts
        .iter()
        .enumerate()
        .map(|(i, (_, at))| serde_json::json!({"name": format!("host-{i}"), "mountPath": at}))
        .collect();
    let (shm, shm_mount) = shared_memory(r.shm_size);
    volumes.push(shm);
    mounts.push(shm_mount);
    let mut init = vec![];
    if let Some((sidecar, (key, devices), vols)) = rxdm_parts(&r) {
        annotations.insert(key, devices.into());
        init.push(sidecar);
        volumes.extend(vols);
        // NCCL's plugin talks to the daemon over its socket directory.
        mounts.push(serde_json::json!({"name": "rxdm-uds", "mountPath": "/run/tcpx"}));
    }
    // The TCPX and TCPXO images' SSH daemon (port 222, which their hostfiles name) is
    // started as gpudirect-tcpxo/nccl-test.yaml and gpudirect-tcpx/nccl-test-latest.yaml
    // start it; the gIB image's entry script starts its own.
    let args = if matches!(flavour, GpuDirect::Tcpxo | GpuDirect::Tcpx) {
        "service ssh restart; exec sleep infinity"
    } else {
        "if [ -x /scripts/container_entry.sh ]; then /scripts/container_entry.sh daemon & fi; exec sleep infinity"
    };
    let mut env = vec![serde_json::json!({"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"})];
    if flavour == GpuDirect::Tcpxo {
        // gpudirect-tcpxo/nccl-test-latest.yaml sets it on the container: the image's
        // driver passes it on to every rank (`-x NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY`),
        // and FasTrak's LLCM finds the aperture devices mounted there.
        env.push(serde_json::json!({"name": "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "value": "/dev/aperture_devices"}));
    }
    Ok(serde_json::json!({
        "metadata": {
            "labels": {
                MANAGED_BY.0: MANAGED_BY.1,
                FLEET_LABEL: fleet,
                ROLE_LABEL: "nccl",
                RUN_LABEL: object_name(run, 63),
            },
            "annotations": annotations,
        },
        "spec": {
            "hostNetwork": r.host_network,
            "dnsPolicy": if r.host_network { "ClusterFirstWithHostNet" } else { "ClusterFirst" },
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "volumes": volumes,
            "initContainers": init,
            "containers": [{
                "name": CONTAINER,
                "image": r.image,
                "securityContext": {"privileged": true},
                "env": env,
                "command": ["/bin/bash", "-c"],
                "args": [args],
                "resources": {"limits": {gke::GPU_RESOURCE: gpus.to_string()}},
                "volumeMounts": mounts,
            }],
        },
    }))
}

/// Test pod `rank` of run `run`, pinned to `node` (`nodeName`: the operator picked the
/// nodes): it tolerates every taint, as `kubectl debug node` pods do. On the GPU-NIC
/// `networks` the fleet file names, else the guides'.
pub fn test_pod(
    fleet: &str,
    run: &str,
    rank: usize,
    node: &KubeNode,
    flavour: GpuDirect,
    gpus: u32,
    networks: Option<&[String]>,
) -> Result<Pod, String> {
    let t = pod_template(fleet, run, flavour, gpus, networks)?;
    let mut v =
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": t["metadata"], "spec": t["spec"]});
    v["metadata"]["name"] = pod_name(run, rank).into();
    v["metadata"]["namespace"] = node.namespace.clone().into();
    v["spec"]["nodeName"] = node.node.clone().into();
    v["spec"]["tolerations"] = serde_json::json!([{"operator": "Exists"}]);
    Ok(serde_json::from_value(v).expect("a test pod is a Pod"))
}

/// Where test pods go: the fleet's node pools, its Kueue queue, and DWS flex-start's
/// longest run (seconds), as a job's JobSet has them; and the GPU-NIC networks they
/// attach (`gke.networks`; none: the guides').
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schedule {
    pub pools: Vec<String>,
    pub queue: Option<String>,
    pub flex_start: Option<u64>,
    pub networks: Option<Vec<String>>,
    /// How long a scheduled run may wait for Kueue's admission and for nodes
    /// (`nccl run --wait`); `None`: as long as it takes.
    pub queue_wait: Option<Duration>,
}

impl Schedule {
    /// From a fleet file: `gke.node_pools`, `gke.queue`, `flex_start`, `gke.networks`.
    pub fn of(spec: Option<&crate::fleet::FleetSpec>) -> Schedule {
        let g = spec.and_then(|s| s.gke.as_ref());
        Schedule {
            pools: g.and_then(|g| g.node_pools.clone()).unwrap_or_default(),
            queue: g.and_then(|g| g.queue.clone()),
            flex_start: spec.and_then(|s| s.flex_start).map(|d| d.0),
            networks: g.and_then(|g| g.networks.clone()),
            queue_wait: None,
        }
    }
}

/// The replicated job of a scheduled run's JobSet.
pub const REPLICATED_JOB: &str = "nccl";

/// The JobSet of a scheduled run.
pub fn test_jobset_name(run: &str) -> String {
    object_name(&format!("fd-{run}"), 40)
}

/// Run `run`'s test pods on `nodes` nodes the scheduler picks (review H4): an indexed
/// JobSet whose pods carry the pool's node affinity, one per node (a required
/// anti-affinity on the hostname), the Kueue queue label and `suspend` (Kueue admits
/// it), and DWS's `provreq.kueue.x-k8s.io/maxRunDurationSeconds` with the flex-start
/// nodeSelector, as a job's JobSet does ([`crate::jobs::jobset::jobset`]); so Cluster
/// Autoscaler can scale a pool from zero and Kueue/DWS admits them. The tolerations are
/// a job's (GPUs, queued provisioning), not every taint.
pub fn test_jobset(
    fleet: &str,
    run: &str,
    namespace: &str,
    nodes: usize,
    flavour: GpuDirect,
    gpus: u32,
    at: &Schedule,
) -> Result<serde_json::Value, String> {
    let js = test_jobset_name(run);
    let mut t = pod_template(fleet, run, flavour, gpus, at.networks.as_deref())?;
    let mut labels = serde_json::json!({
        MANAGED_BY.0: MANAGED_BY.1,
        FLEET_LABEL: fleet,
        ROLE_LABEL: "nccl",
        RUN_LABEL: object_name(run, 63),
    });
    let mut annotations = serde_json::Map::new();
    if let Some(q) = &at.queue {
        labels["kueue.x-k8s.io/queue-name"] = q.clone().into();
    }
    let mut selector = serde_json::Map::new();
    if let Some(secs) = at.flex_start {
        annotations.insert(
            "provreq.kueue.x-k8s.io/maxRunDurationSeconds".into(),
            secs.to_string().into(),
        );
        selector.insert("cloud.google.com/gke-flex-start".into(), "true".into());
    }
    // On the run's own label, which the pod template carries (see jobs::jobset: Kueue's
    // ProvisioningRequest PodTemplate has no `jobset-name`; gke review L1).
    let mut affinity = serde_json::json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {RUN_LABEL: object_name(run, 63)}}, "topologyKey": "kubernetes.io/hostname"}
    ]}});
    if !at.pools.is_empty() {
        affinity["nodeAffinity"] = serde_json::json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": gke::view::POOL_LABEL, "operator": "In", "values": at.pools}]}
        ]}});
    }
    t["spec"]["nodeSelector"] = selector.into();
    t["spec"]["affinity"] = affinity;
    if recipe(flavour).rxdm.is_some() {
        crate::cloud::gke::nccl::one_rxdm_per_node(&mut t);
    }
    t["spec"]["tolerations"] = serde_json::json!([
        {"key": gke::GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
        {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}
    ]);
    Ok(serde_json::json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": js, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {
            "suspend": at.queue.is_some(),
            "network": {"enableDNSHostnames": true, "subdomain": js},
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [{
                "name": REPLICATED_JOB,
                "replicas": 1,
                "template": {"spec": {
                    "parallelism": nodes,
                    "completions": nodes,
                    "completionMode": "Indexed",
                    "backoffLimit": 0,
                    "template": t,
                }},
            }],
        },
    }))
}

/// What a run creates in the cluster: a pinned pod per picked node, or one JobSet the
/// scheduler places ([`scheduled`]). `nccl run --dry-run` prints exactly these.
pub fn run_objects(
    fleet: &str,
    run: &str,
    nodes: &[NodeTarget],
    flavour: GpuDirect,
    gpus: u32,
    at: &Schedule,
) -> Result<Vec<serde_json::Value>, String> {
    let kube: Vec<&KubeNode> = nodes
        .iter()
        .map(|n| n.kube().ok_or_else(|| format!("{}: not a GKE node", n.name)))
        .collect::<Result<_, _>>()?;
    let first = kube.first().ok_or("no GKE nodes selected")?;
    if scheduled(nodes) {
        return Ok(vec![test_jobset(
            fleet,
            run,
            &first.namespace,
            nodes.len(),
            flavour,
            gpus,
            at,
        )?]);
    }
    kube.iter()
        .enumerate()
        .map(|(rank, k)| {
            let p = test_pod(fleet, run, rank, k, flavour, gpus, at.networks.as_deref())?;
            Ok(serde_json::to_value(p).expect("a Pod is JSON"))
        })
        .collect()
}

/// Whether a run's pods go through the scheduler: some rank names no node (a pool at
/// zero, or a fleet whose runs Kueue admits: [`crate::cloud::gke::backend::Target::pad`]).
pub fn scheduled(nodes: &[NodeTarget]) -> bool {
    nodes.iter().any(|n| n.kube().is_some_and(|k| k.node.is_empty()))
}

/// The objects as `kubectl --dry-run=client -o yaml` prints a list of them: YAML
/// documents separated by `---`, apiVersion and kind first.
pub fn objects_yaml(objects: &[serde_json::Value]) -> String {
    objects
        .iter()
        .map(|o| serde_yaml::to_string(o).expect("JSON is YAML"))
        .collect::<Vec<_>>()
        .join("---\n")
}

/// Where GKE's TCPXO installer puts the plugin and its `nccl-env-profile.sh` in a pod
/// (the driver directory, mounted at /usr/local/nvidia): the manifest's `NCCL_LIB_DIR`.
const TCPXO_LIB_DIR: &str = "/usr/local/nvidia/lib64";

/// Whether the flavour's run script can run `spec` on nodes of `gpus` GPUs: TCPXO's
/// (demo-run-nccl-test-tcpxo-via-mpi.sh) and TCPX's (the image's run-nccl.sh, which also
/// runs its own 5 warm-up and 20 timed iterations) step sizes by 2 and pass no data
/// type, and their hostfiles (gen_hostfiles.sh) are for 1, 2, 4 or 8 ranks a node.
pub fn script_takes(spec: &RunSpec, flavour: GpuDirect, gpus: u32) -> Result<(), String> {
    let name = match flavour {
        GpuDirect::Tcpxo => "TCPXO",
        GpuDirect::Tcpx => "TCPX",
        _ => return Ok(()),
    };
    let why = if spec.step_factor != 2 {
        format!("steps sizes by 2, not {}", spec.step_factor)
    } else if spec.dtype != "float" {
        format!("runs float only, not {}", spec.dtype)
    } else if ![1, 2, 4, 8].contains(&gpus) {
        format!("runs 1, 2, 4 or 8 GPUs a node, not {gpus}")
    } else {
        return Ok(());
    };
    Err(format!("the {name} image's run script {why}"))
}

/// The timed and warm-up iterations the TCPX image's `/scripts/run-nccl.sh` runs
/// whatever it is asked (google/nccl-plugin-gpudirecttcpx scripts/run-nccl.sh:
/// `-w 5 --iters 20`).
pub const TCPX_SCRIPT_ITERS: (u32, u32) = (20, 5);

/// The note for a run whose `-n`/`-w` the flavour's script does not take, so that they
/// are said, not silently dropped (gke review L4); `None` when the script runs what was
/// asked, or for the other flavours, whose scripts take both.
pub fn script_ignores(spec: &RunSpec, flavour: GpuDirect) -> Option<String> {
    let (iters, warmup) = TCPX_SCRIPT_ITERS;
    (flavour == GpuDirect::Tcpx && (spec.iters != iters || spec.warmup != warmup)).then(|| {
        format!(
            "note: the TCPX image's run-nccl.sh runs its own {warmup} warm-up and {iters} timed iterations: -n {} -w {} are not used",
            spec.iters, spec.warmup
        )
    })
}

/// The head pod's script: the flavour's run script across every pod (by address).
pub fn head_script(spec: &RunSpec, flavour: GpuDirect, hosts: &[String], gpus: u32) -> String {
    let mut s = String::from("#!/bin/bash\n# written by flightdeck: nccl-tests on GKE through the image's own run script\nset -u\n");
    for line in spec.env.iter().flatten() {
        let _ = writeln!(s, "{line}");
    }
    let test = spec.collective.trim_end_matches("_perf");
    let list = hosts.join(" ");
    match flavour {
        // As gpudirect-tcpxo/nccl-test.yaml's allgather.sh: accept every pod's SSH host
        // key (port 222), write the hostfiles mpirun reads, then the image's driver with
        // the variables it reads (demo-run-nccl-test-tcpxo-via-mpi.sh: BENCHMARK, NHOSTS,
        // NCCL_LIB_DIR, LD_LIBRARY_PATH; DATA_MIN, DATA_MAX, GPU_PER_NODE, RUN_ITERS,
        // WARMUP_ITERS). It steps sizes by 2 ([`script_takes`]).
        GpuDirect::Tcpxo => {
            let _ = writeln!(
                s,
                "{}",
                crate::shellenv::export("PATH", crate::shellenv::Value::Prepend("/scripts"))
            );
            let quoted: Vec<String> = hosts.iter().map(|h| crate::shellenv::quote(h)).collect();
            let quoted = quoted.join(" ");
            let _ = writeln!(s, "init_ssh.sh {quoted}");
            let _ = writeln!(s, "gen_hostfiles.sh {quoted}");
            let _ = writeln!(
                s,
                "BENCHMARK={test}_perf NHOSTS={n} NCCL_LIB_DIR={lib} LD_LIBRARY_PATH=\"${{LD_LIBRARY_PATH:-{lib}}}\" \
                 DATA_MIN={b} DATA_MAX={e} GPU_PER_NODE={gpus} RUN_ITERS={it} WARMUP_ITERS={w} exec demo-run-nccl-test-tcpxo-via-mpi.sh",
                n = hosts.len(),
                lib = TCPXO_LIB_DIR,
                b = spec.min_bytes,
                e = spec.max_bytes,
                it = spec.iters,
                w = spec.warmup,
            );
        }
        // As gpudirect-tcpx/nccl-config.yaml's allgather.sh: accept every pod's SSH host
        // key (init_ssh.sh), write the hostfiles in the scripts' directory (pushd /scripts;
        // gen_hostfiles.sh), then run-nccl.sh with its positional arguments (benchmark,
        // LD_LIBRARY_PATH, GPUs a node, the GPU NICs, sizes, hosts), which reads
        // `hostfiles$NHOSTS/hostfile$GPUS` next to itself. Sizes step by 2 ([`script_takes`]).
        GpuDirect::Tcpx => {
            let _ = writeln!(
                s,
                "{}",
                crate::shellenv::export("PATH", crate::shellenv::Value::Prepend("/scripts"))
            );
            let quoted: Vec<String> = hosts.iter().map(|h| crate::shellenv::quote(h)).collect();
            let quoted = quoted.join(" ");
            let _ = writeln!(s, "init_ssh.sh {quoted}");
            let _ = writeln!(
                s,
                "(cd \"$(dirname \"$(command -v gen_hostfiles.sh)\")\" && gen_hostfiles.sh {quoted}) || exit 1"
            );
            let _ = writeln!(
                s,
                "exec run-nccl.sh {test}_perf \"${{LD_LIBRARY_PATH:-}}\" {gpus} eth1,eth2,eth3,eth4 {b} {e} {n}",
                b = spec.min_bytes,
                e = spec.max_bytes,
                n = hosts.len()
            );
        }
        _ => {
            let _ = writeln!(
                s,
                "{}",
                crate::shellenv::export("PATH", crate::shellenv::Value::Prepend("/usr/local/gib/scripts"))
            );
            let _ = writeln!(
                s,
                "exec run_nccl_tests.sh -t {test} -b {b} -e {e} -f {f} -g {gpus} -w {w} -n {it} {list}",
                b = spec.min_bytes,
                e = spec.max_bytes,
                f = spec.step_factor,
                w = spec.warmup,
                it = spec.iters
            );
        }
    }
    s
}

/// The test container's image in the run's objects (a JobSet or its pods).
fn image_of(objects: &[serde_json::Value]) -> Option<String> {
    let o = objects.first()?;
    let pod = if o["kind"] == "JobSet" {
        &o["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    } else {
        &o["spec"]
    };
    pod["containers"][0]["image"].as_str().map(str::to_string)
}

/// Create the run's test pods ([`run_objects`]: pinned to `nodes`, or a JobSet the
/// scheduler places) and wait until they all run; the pods as nodes (head first) and
/// their addresses.
#[allow(clippy::too_many_arguments)]
pub async fn create_pods(
    clients: &Clients,
    fleet: &str,
    run: &str,
    nodes: &[NodeTarget],
    flavour: GpuDirect,
    gpus: u32,
    at: &Schedule,
    progress: &(dyn Fn(String) + Sync),
) -> Result<(Vec<NodeTarget>, Vec<String>), String> {
    let first = nodes
        .first()
        .and_then(|n| n.kube().cloned())
        .ok_or("not a GKE fleet's nodes")?;
    let client = clients.get(&first.cluster).await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &first.namespace);
    let mut objects = run_objects(fleet, run, nodes, flavour, gpus, at)?;
    // The plugin the cluster's installer put on the nodes decides the test image.
    if let Some(installed) = gke::nccl::kube_system_daemonsets(client.clone()).await {
        if let Some(w) = gke::nccl::missing_installer(flavour, &installed) {
            progress(w);
        }
        for note in gke::nccl::follow_installer(&mut objects, flavour, &installed) {
            progress(note);
        }
    }
    let image = image_of(&objects).unwrap_or_else(|| recipe(flavour).image.to_string());
    let (made, ips) = if scheduled(nodes) {
        progress(format!(
            "creating JobSet {} of {} ({image}) for run {run}, placed by the scheduler{}{}",
            test_jobset_name(run),
            crate::words::plural(nodes.len(), "test pod"),
            at.queue
                .as_ref()
                .map(|q| format!(", Kueue queue {q}"))
                .unwrap_or_default(),
            at.flex_start
                .map(|s| format!(", DWS flex-start (at most {s} s)"))
                .unwrap_or_default()
        ));
        create_jobset(clients, &first, &objects[0]).await?;
        match wait_scheduled(&api, run, nodes.len(), at.queue_wait, POD_START, progress).await {
            Ok(pods) => pods,
            Err(e) => {
                let _ = remove_run(clients, &first, run).await;
                return Err(e);
            }
        }
    } else {
        progress(format!(
            "creating {} ({image}) for run {run}",
            crate::words::plural(nodes.len(), "test pod"),
        ));
        let mut made = vec![];
        for (rank, obj) in objects.into_iter().enumerate() {
            let mut pod: Pod = serde_json::from_value(obj).map_err(|e| e.to_string())?;
            gke::stamp_owner_meta(&clients.owner(), &mut pod.metadata);
            if let Err(e) = api.create(&PostParams::default(), &pod).await {
                let _ = delete_run_pods(clients, &first, run).await;
                return Err(format!(
                    "creating test pod {}: {}",
                    pod_name(run, rank),
                    gke::cluster::why(&e)
                ));
            }
            made.push((pod_name(run, rank), None));
        }
        let mut ips = vec![];
        for (name, _) in &made {
            if let Err(e) = wait_running(&api, name, POD_START).await {
                let _ = delete_run_pods(clients, &first, run).await;
                return Err(e);
            }
            let p = api.get(name).await.map_err(|e| gke::cluster::why(&e))?;
            ips.push(pod_ip(&p)?);
        }
        (made, ips)
    };
    progress(format!("test pods running: {}", ips.join(" ")));
    let pods = nodes
        .iter()
        .zip(made)
        .map(|(n, (name, node))| {
            let mut t = n.clone();
            if let Some(k) = t.kube_mut() {
                k.pod = Some(name);
                k.container = Some(CONTAINER.into());
                if let Some(node) = node {
                    k.node = node;
                }
            }
            t
        })
        .collect();
    Ok((pods, ips))
}

/// A running pod's address.
fn pod_ip(p: &Pod) -> Result<String, String> {
    p.status.as_ref().and_then(|s| s.pod_ip.clone()).ok_or_else(|| {
        format!(
            "pod {} runs without an address ({})",
            p.metadata.name.clone().unwrap_or_default(),
            pod_phase(p).0
        )
    })
}

/// The label the Job controller gives each pod of an indexed Job: its index.
const INDEX_LABEL: &str = "batch.kubernetes.io/job-completion-index";

/// Wait until the `n` pods of a scheduled run (JobSet [`test_jobset_name`]) all run:
/// each (name, node) in index order and its address. Pods are created once Kueue admits
/// the JobSet, and run once the pool has nodes for them.
async fn wait_scheduled(
    api: &Api<Pod>,
    run: &str,
    n: usize,
    queue_wait: Option<Duration>,
    limit: Duration,
    progress: &(dyn Fn(String) + Sync),
) -> Result<(Vec<(String, Option<String>)>, Vec<String>), String> {
    let lp = ListParams::default().labels(&format!("{RUN_LABEL}={}", object_name(run, 63)));
    let lp = &lp;
    let list = move || async move {
        api.list(lp)
            .await
            .map(|l| l.items)
            .map_err(|e| gke::cluster::why(&e))
    };
    wait_scheduled_with(list, run, n, queue_wait, limit, progress).await
}

/// Where a scheduled run's pods are on their way: what [`wait_scheduled_with`] tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiting {
    /// No pod yet: Kueue has not admitted the JobSet (a queued ProvisioningRequest waits
    /// for capacity, which may take hours on DWS).
    Admission,
    /// Pods without a node: the autoscaler brings the pool's nodes up.
    Nodes,
    /// Every pod on its node: the containers start (the image pull), timed.
    Start,
}

/// [`wait_scheduled`] over any lister of the run's pods (a test's fake, under tokio's
/// paused clock). No limit holds while the JobSet waits in the queue or its pods wait
/// for nodes: queued provisioning and a scale-up from zero take as long as capacity
/// takes (gke review H2: a 600 s cap on the whole deleted the JobSet and the capacity
/// already booked), unless the operator bounds it (`queue_wait`, `nccl run --wait`).
/// `limit` counts from when every pod is on a node: the containers' start (driver,
/// installers, a multi-GB image pull). Each change of phase is told.
async fn wait_scheduled_with<L, F>(
    mut list: L,
    run: &str,
    n: usize,
    queue_wait: Option<Duration>,
    limit: Duration,
    progress: &(dyn Fn(String) + Sync),
) -> Result<(Vec<(String, Option<String>)>, Vec<String>), String>
where
    L: FnMut() -> F,
    F: std::future::Future<Output = Result<Vec<Pod>, String>>,
{
    let since = tokio::time::Instant::now();
    let mut phase: Option<(Waiting, tokio::time::Instant)> = None;
    loop {
        let pods = list().await?;
        let mut indexed: Vec<(usize, &Pod)> = pods
            .iter()
            .filter_map(|p| {
                let i = p.metadata.labels.as_ref()?.get(INDEX_LABEL)?.parse().ok()?;
                Some((i, p))
            })
            .collect();
        indexed.sort_by_key(|(i, _)| *i);
        if let Some((_, p)) = indexed
            .iter()
            .find(|(_, p)| matches!(pod_phase(p).0.as_str(), "Succeeded" | "Failed"))
        {
            return Err(format!(
                "test pod {} ended ({}) before the run",
                p.metadata.name.clone().unwrap_or_default(),
                pod_phase(p).0
            ));
        }
        let running = indexed
            .iter()
            .filter(|(_, p)| pod_phase(p).0 == "Running")
            .count();
        if indexed.len() == n && running == n {
            let mut made = vec![];
            let mut ips = vec![];
            for (_, p) in indexed {
                made.push((
                    p.metadata.name.clone().unwrap_or_default(),
                    p.spec.as_ref().and_then(|s| s.node_name.clone()),
                ));
                ips.push(pod_ip(p)?);
            }
            return Ok((made, ips));
        }
        let bound = indexed
            .iter()
            .filter(|(_, p)| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_ref())
                    .is_some_and(|x| !x.is_empty())
            })
            .count();
        let now_waiting = if indexed.len() < n {
            Waiting::Admission
        } else if bound < n {
            Waiting::Nodes
        } else {
            Waiting::Start
        };
        if phase.map(|(w, _)| w) != Some(now_waiting) {
            let waited = since.elapsed().as_secs();
            progress(match now_waiting {
                Waiting::Admission => format!(
                    "JobSet {} waits to be admitted (Kueue, queued provisioning): no time limit while it is queued; Ctrl-C stops the run and removes it",
                    test_jobset_name(run)
                ),
                Waiting::Nodes => format!(
                    "{} of {} test pods wait for a node (the pool scales up) after {waited} s: no time limit until they are placed",
                    n - bound,
                    n
                ),
                Waiting::Start => format!(
                    "test pods placed after {waited} s; their containers start (image pull) within {} s",
                    limit.as_secs()
                ),
            });
            phase = Some((now_waiting, tokio::time::Instant::now()));
        }
        if let (Some(most), Some((w, _))) = (queue_wait, phase) {
            if w != Waiting::Start && since.elapsed() > most {
                return Err(format!(
                    "the run's JobSet {} still waits {} after {} s (--wait): {} of {} test pods exist, {bound} on a node",
                    test_jobset_name(run),
                    if w == Waiting::Admission { "to be admitted" } else { "for nodes" },
                    most.as_secs(),
                    indexed.len(),
                    n
                ));
            }
        }
        if let Some((Waiting::Start, at)) = phase {
            if at.elapsed() > limit {
                let why: Vec<String> = indexed
                    .iter()
                    .filter(|(_, p)| pod_phase(p).0 != "Running")
                    .map(|(i, p)| {
                        let (phase, waiting) = pod_phase(p);
                        format!("pod {i}: {}", waiting.unwrap_or(phase))
                    })
                    .collect();
                return Err(format!(
                    "the run's JobSet {}: its {} were placed on nodes but did not run within {}s: {running} run{}",
                    test_jobset_name(run),
                    crate::words::plural(n, "test pod"),
                    limit.as_secs(),
                    if why.is_empty() {
                        String::new()
                    } else {
                        format!("; {}", why.join("; "))
                    }
                ));
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Remove run `run`'s test pods and, when it was scheduled, its JobSet (first, so that
/// its Job makes no pod again); how many pods there were.
async fn remove_run(clients: &Clients, node: &KubeNode, run: &str) -> Result<usize, String> {
    let client = clients.get(&node.cluster).await?;
    let sets: Api<DynamicObject> = Api::namespaced_with(client, &node.namespace, &jobset_resource());
    let pods = delete_run_pods_count(clients, node, run).await?;
    match sets
        .delete(&test_jobset_name(run), &DeleteParams::foreground())
        .await
    {
        Ok(_) => {}
        Err(e) if gke::cluster::not_found(&e) => {}
        Err(e) => {
            return Err(format!(
                "deleting JobSet {}: {}",
                test_jobset_name(run),
                gke::cluster::why(&e)
            ))
        }
    }
    delete_run_pods(clients, node, run).await?;
    Ok(pods)
}

/// How many test pods run `run` has.
async fn delete_run_pods_count(clients: &Clients, node: &KubeNode, run: &str) -> Result<usize, String> {
    let client = clients.get(&node.cluster).await?;
    let api: Api<Pod> = Api::namespaced(client, &node.namespace);
    api.list(&ListParams::default().labels(&format!("{RUN_LABEL}={}", object_name(run, 63))))
        .await
        .map(|l| l.items.len())
        .map_err(|e| gke::cluster::why(&e))
}

/// The GPUs a node of the run has: `-g`, else the node's allocatable GPUs (pinned pods),
/// else the machine type's (scheduled pods: there may be no node yet).
async fn run_gpus(clients: &Clients, s: &Start) -> Result<(u32, Option<String>), String> {
    let spec = &s.spec;
    if scheduled(&s.nodes) {
        let from_type = s
            .machine
            .as_ref()
            .and_then(|(m, _)| super::expect::gpus_per_node(m));
        let gpus = spec.gpus.or(from_type).ok_or(
            "the test pods are placed by the scheduler (no node picked yet): give the GPUs a node has (-g/--ngpus) or its machine type (--machine-type)",
        )?;
        return Ok((gpus.max(1), None));
    }
    let first = s
        .nodes
        .first()
        .and_then(|n| n.kube().cloned())
        .ok_or("no GKE nodes selected")?;
    let (machine_type, node_gpus) = machine(clients, &first).await?;
    let gpus = spec.gpus.map(u64::from).unwrap_or(node_gpus).max(1) as u32;
    Ok((gpus, machine_type))
}

/// Start an nccl-tests run on the GKE nodes of `s`, its pods placed as the fleet file
/// says ([`Schedule::of`], from the state's record of the fleet).
pub async fn start(state_dir: &Path, s: &Start, progress: Progress<'_>) -> Result<Started, String> {
    let at = Schedule::of(super::remote::fleet_spec(state_dir, &s.fleet, &s.fleet).as_ref());
    start_with(state_dir, s, &at, progress).await
}

/// Start an nccl-tests run on the GKE nodes of `s`: the test pods (pinned, or placed by
/// the scheduler at `at` when a rank names no node), the head's script (detached in the
/// head pod, as a VM run's is on its head node), the record in the state store and the
/// history entry. Pods need no pre-flight and no node-to-node SSH (the image brings its
/// own): `s.preflight`, `s.node_ssh` and `s.mpirun` are the node launcher's.
pub async fn start_with(
    state_dir: &Path,
    s: &Start,
    at: &Schedule,
    progress: Progress<'_>,
) -> Result<Started, String> {
    let (fleet, nodes, spec) = (s.fleet.as_str(), s.nodes.as_slice(), &s.spec);
    let clients = s.reach.kube();
    spec.check().map_err(|e| e.to_string())?;
    let first = nodes
        .first()
        .and_then(|n| n.kube().cloned())
        .ok_or("no GKE nodes selected")?;
    let (gpus, machine_type) = run_gpus(clients, s).await?;
    script_takes(spec, spec.profile, gpus)?;
    if let Some(note) = script_ignores(spec, spec.profile) {
        progress(note);
    }
    let machine = s
        .machine
        .clone()
        .or_else(|| machine_type.map(|m| (m, "the node's GKE label".to_string())));
    let id = runner::new_id(&spec.collective, crate::store::now_unix());
    let (pods, ips) = create_pods(clients, fleet, &id, nodes, spec.profile, gpus, at, progress).await?;
    let script = head_script(spec, spec.profile, &ips, gpus);
    let (command, input) = runner::launch_command(&id, &script, false);
    let head = pods[0].clone();
    let head_pod = head
        .kube()
        .and_then(|k| k.pod.clone())
        .unwrap_or_else(|| pod_name(&id, 0));
    let out = crate::exec::collect_with_input(s.reach.clone(), vec![(head.clone(), command, input)]).await;
    let (code, stdout, stderr) = out
        .into_iter()
        .next()
        .unwrap_or((-1, String::new(), String::new()));
    let pid = stdout
        .trim()
        .strip_prefix("started ")
        .and_then(|p| p.parse().ok());
    if code != 0 || pid.is_none() {
        let _ = remove_run(clients, &first, &id).await;
        return Err(format!(
            "the run could not start in {head_pod}: {} {}",
            stdout.trim(),
            stderr.trim()
        ));
    }
    let mut saved = remote::saved_run(
        &id,
        fleet,
        spec,
        &pods,
        machine.as_ref().map(|(m, f)| (m.clone(), f.as_str())),
        s.purpose.clone(),
    );
    // Unedited, the head pod got no lines from flightdeck: the image's script set the
    // GKE profile of the flavour, never a VM's.
    saved.spec.env = spec.env.clone().unwrap_or_else(|| profile::pod_env(spec.profile));
    let (dir, f, rid, h, entry) = (
        state_dir.to_path_buf(),
        fleet.to_string(),
        id.clone(),
        head.clone(),
        saved.clone(),
    );
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        remote::record_run(&dir, &f, &rid, &[(h, pid)])?;
        history::save(&dir, &entry)?;
        Ok(())
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("{e:#}"))?;
    progress(format!(
        "run {id} started in {head_pod} on {}",
        crate::words::plural(nodes.len(), "node")
    ));
    Ok(Started {
        id,
        heads: vec![head],
        saved,
    })
}

#[cfg(test)]
mod tests {
    /// Gke review H2, under tokio's paused clock: a scheduled test whose JobSet waits 20
    /// minutes in the queue, then 5 for the pool's nodes, is not given up; its pods then
    /// run. Once placed, pods that do not start within the limit end the wait, naming why.
    #[tokio::test(start_paused = true)]
    async fn a_queued_test_waits_past_the_limit_until_placed_then_is_timed() {
        use std::sync::Mutex;
        let t0 = tokio::time::Instant::now();
        let pod = |i: usize, node: Option<&str>, phase: &str| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("p-{i}"), "labels": {INDEX_LABEL: i.to_string()}},
                "spec": {"containers": [], "nodeName": node},
                "status": {"phase": phase, "podIP": format!("10.0.0.{i}")}
            }))
            .unwrap()
        };
        let said = Mutex::new(Vec::<String>::new());
        let progress = |m: String| said.lock().unwrap().push(m);
        let list = move || async move {
            let t = t0.elapsed().as_secs();
            Ok(match t {
                0..1200 => vec![],
                1200..1500 => vec![pod(0, None, "Pending"), pod(1, None, "Pending")],
                1500..1560 => vec![pod(0, Some("n0"), "Pending"), pod(1, Some("n1"), "Pending")],
                _ => vec![pod(0, Some("n0"), "Running"), pod(1, Some("n1"), "Running")],
            })
        };
        let (made, ips) = wait_scheduled_with(list, "r1", 2, None, Duration::from_secs(600), &progress)
            .await
            .expect("not given up while queued");
        assert!(t0.elapsed() >= Duration::from_secs(1560));
        assert_eq!(made[1], ("p-1".to_string(), Some("n1".to_string())));
        assert_eq!(ips, ["10.0.0.0", "10.0.0.1"]);
        let said = said.lock().unwrap().clone();
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(
            said[0].contains("waits to be admitted") && said[0].contains("no time limit"),
            "{said:?}"
        );
        assert!(
            said[1].starts_with("2 of 2 test pods wait for a node"),
            "{said:?}"
        );
        assert!(said[2].contains("within 600 s"), "{said:?}");

        // Placed but never running: the limit counts from the placement.
        let t1 = tokio::time::Instant::now();
        let stuck =
            move || async move { Ok(vec![pod(0, Some("n0"), "Pending"), pod(1, Some("n1"), "Running")]) };
        let err = wait_scheduled_with(stuck, "r2", 2, None, Duration::from_secs(600), &|_| {})
            .await
            .unwrap_err();
        assert!(t1.elapsed() >= Duration::from_secs(600) && t1.elapsed() < Duration::from_secs(610));
        assert!(
            err.contains("were placed on nodes but did not run within 600s: 1 run"),
            "{err}"
        );

        // The operator's bound (`--wait 900`): a JobSet still queued after it ends the wait.
        let t2 = tokio::time::Instant::now();
        let queued = move || async move { Ok(vec![]) };
        let most = Some(Duration::from_secs(900));
        let err = wait_scheduled_with(queued, "r3", 2, most, Duration::from_secs(600), &|_| {})
            .await
            .unwrap_err();
        assert!(t2.elapsed() >= Duration::from_secs(900) && t2.elapsed() < Duration::from_secs(910));
        assert!(
            err.contains("still waits to be admitted after 900 s (--wait): 0 of 2"),
            "{err}"
        );
    }

    use super::*;

    fn spec() -> RunSpec {
        RunSpec {
            collective: "all_gather".into(),
            min_bytes: 1024,
            max_bytes: 8 << 30,
            step_factor: 2,
            gpus: Some(8),
            iters: 20,
            warmup: 5,
            dtype: "float".into(),
            engine: crate::nccl::runner::Engine::NcclTests,
            profile: GpuDirect::Rdma,
            nccl_tests_dir: None,
            env: None,
        }
    }

    #[test]
    fn rdma_runs_the_gib_script_across_the_pods() {
        let s = head_script(
            &spec(),
            GpuDirect::Rdma,
            &["10.1.0.5".into(), "10.1.0.6".into()],
            8,
        );
        assert!(s.contains("exec run_nccl_tests.sh -t all_gather -b 1024 -e 8589934592 -f 2 -g 8 -w 5 -n 20 10.1.0.5 10.1.0.6"), "{s}");
        assert!(
            s.contains("export PATH='/usr/local/gib/scripts'\"${PATH:+:$PATH}\""),
            "{s}"
        );
        let t = head_script(&spec(), GpuDirect::Tcpxo, &["a".into(), "b".into()], 8);
        assert!(t.contains("BENCHMARK=all_gather_perf NHOSTS=2"), "{t}");
    }

    #[test]
    fn test_pods_follow_the_guides() {
        let node = KubeNode::for_tests("gke-a3u-1");
        let v = serde_json::to_value(test_pod("a3u", "ag-1", 0, &node, GpuDirect::Rdma, 8, None).unwrap())
            .unwrap();
        assert_eq!(v["spec"]["nodeName"], "gke-a3u-1");
        assert_eq!(v["spec"]["hostNetwork"], false);
        assert!(v["metadata"]["annotations"]["networking.gke.io/interfaces"]
            .as_str()
            .unwrap()
            .contains("rdma-7"));
        assert_eq!(
            v["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
            "8"
        );
        let x = serde_json::to_value(test_pod("a3m", "ag-1", 1, &node, GpuDirect::Tcpxo, 8, None).unwrap())
            .unwrap();
        assert!(x["metadata"]["annotations"]["networking.gke.io/interfaces"]
            .as_str()
            .unwrap()
            .contains("vpc8"));
        let rxdm = &x["spec"]["initContainers"][0];
        assert_eq!(rxdm["name"], "tcpxo-daemon");
        assert_eq!(rxdm["restartPolicy"], "Always", "a native sidecar");
        assert!(
            x["metadata"]["annotations"]["devices.gke.io/container.tcpxo-daemon"]
                .as_str()
                .unwrap()
                .contains("/dev/nvidia7")
        );
        assert_eq!(x["metadata"]["name"], "fd-nccl-ag-1-1");
    }

    /// NCCL test pods attach the GPU-NIC networks the fleet file names (`gke.networks`),
    /// pinned or scheduled, as a job's pods do; a count the flavour does not attach is
    /// refused, not silently replaced by the guides' networks.
    #[test]
    fn test_pods_attach_the_fleet_files_networks() {
        let node = KubeNode::for_tests("gke-a3m-1");
        let nets: Vec<String> = (0..8).map(|i| format!("team-vpc-{i}")).collect();
        let at = Schedule {
            networks: Some(nets.clone()),
            ..Schedule::default()
        };
        let pinned = serde_json::to_value(
            test_pod("a3m", "ag-1", 0, &node, GpuDirect::Tcpxo, 8, Some(&nets)).unwrap(),
        )
        .unwrap();
        let js = test_jobset("a3m", "ag-1", "default", 2, GpuDirect::Tcpxo, 8, &at).unwrap();
        let scheduled = &js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
        for pod in [&pinned, scheduled] {
            let ifaces = pod["metadata"]["annotations"]["networking.gke.io/interfaces"]
                .as_str()
                .unwrap();
            for (i, n) in nets.iter().enumerate() {
                let want = format!("{{\"interfaceName\":\"eth{}\",\"network\":\"{n}\"}}", i + 1);
                assert!(ifaces.contains(&want), "{want} not in {ifaces}");
            }
            assert!(!ifaces.contains("vpc1\""), "{ifaces}");
        }
        let err = test_pod("a3h", "ag-1", 0, &node, GpuDirect::Tcpx, 8, Some(&nets)).unwrap_err();
        assert!(err.contains("8 network(s); Tcpx pods attach 4"), "{err}");
    }

    /// Google's TCPXO scripts (tests/fixtures/reference/nccl-plugin-gpudirect-tcpxo).
    fn tcpxo_script(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/reference/nccl-plugin-gpudirect-tcpxo/tcpxo_scripts")
            .join(name)
    }

    const DEMO_RUN: &str = "demo-run-nccl-test-tcpxo-via-mpi.sh";

    fn tcpxo_spec() -> RunSpec {
        RunSpec {
            profile: GpuDirect::Tcpxo,
            ..spec()
        }
    }

    /// The variables a script reads: `: "${X:?...}"` (it must be set) and
    /// `X="${X:-...}"` (a default).
    fn script_reads(text: &str) -> std::collections::BTreeSet<String> {
        let mut names = std::collections::BTreeSet::new();
        for l in text.lines().map(str::trim) {
            if let Some(r) = l.strip_prefix(": \"${") {
                if let Some((n, _)) = r.split_once(":?") {
                    names.insert(n.to_string());
                }
            } else if let Some((n, r)) = l.split_once("=\"${") {
                if r.starts_with(&format!("{n}:-")) {
                    names.insert(n.to_string());
                }
            }
        }
        names
    }

    /// The TCPXO head script gives the image's driver exactly the variables it reads
    /// (not MIN_BYTES, MAX_BYTES, FACTOR, GPUS_PER_NODE, HOSTS, which it ignores), and
    /// runs init_ssh.sh and gen_hostfiles.sh with the pods first, as the manifest's
    /// allgather.sh does.
    #[test]
    fn tcpxo_head_sets_what_the_image_script_reads() {
        let reads = script_reads(&std::fs::read_to_string(tcpxo_script(DEMO_RUN)).unwrap());
        for n in [
            "NCCL_LIB_DIR",
            "BENCHMARK",
            "NHOSTS",
            "DATA_MIN",
            "DATA_MAX",
            "GPU_PER_NODE",
        ] {
            assert!(reads.contains(n), "{n} not found in {reads:?}");
        }
        let s = head_script(
            &tcpxo_spec(),
            GpuDirect::Tcpxo,
            &["10.1.0.5".into(), "10.1.0.6".into()],
            8,
        );
        let line = s.lines().find(|l| l.contains(DEMO_RUN)).unwrap();
        let (assigns, run) = line.split_once(" exec ").unwrap();
        assert_eq!(run, DEMO_RUN);
        let set: std::collections::BTreeSet<String> = assigns
            .split_whitespace()
            .map(|w| {
                w.split_once('=')
                    .unwrap_or_else(|| panic!("{w}: no assignment"))
                    .0
                    .to_string()
            })
            .collect();
        assert_eq!(set, reads, "{line}");
        let lines: Vec<&str> = s.lines().collect();
        let at = |p: &str| {
            lines
                .iter()
                .position(|l| l.starts_with(p))
                .unwrap_or_else(|| panic!("no {p} in {s}"))
        };
        assert_eq!(lines[at("init_ssh.sh ")], "init_ssh.sh '10.1.0.5' '10.1.0.6'");
        assert_eq!(
            lines[at("gen_hostfiles.sh ")],
            "gen_hostfiles.sh '10.1.0.5' '10.1.0.6'"
        );
        assert!(at("init_ssh.sh ") < at("gen_hostfiles.sh ") && at("gen_hostfiles.sh ") < at("BENCHMARK="));
    }

    /// The TCPXO head script under bash against Google's own init_ssh.sh,
    /// gen_hostfiles.sh and demo-run-nccl-test-tcpxo-via-mpi.sh (byte-for-byte copies),
    /// with `ssh`, `mpirun` and `tee` stand-ins that record what they get: mpirun finds
    /// the hostfile naming both pods and runs the sizes, iterations and GPUs asked for.
    #[test]
    fn tcpxo_head_script_runs_googles_scripts() {
        let demo = std::fs::read_to_string(tcpxo_script(DEMO_RUN)).unwrap();
        let (argv, hostfile) = run_head_with_recorders(&tcpxo_spec(), GpuDirect::Tcpxo, &[(DEMO_RUN, demo)]);
        let has = |pair: &[&str]| argv.windows(pair.len()).any(|w| w == pair);
        for pair in [
            &["-np", "16"][..],
            &["--hostfile", &hostfile],
            &["-x", "NCCL_LIB_DIR=/usr/local/nvidia/lib64"],
            &[
                "all_gather_perf",
                "-b",
                "1024",
                "-e",
                "8589934592",
                "-f",
                "2",
                "-g",
                "1",
            ],
            &["-w", "5", "--iters", "20"],
        ] {
            assert!(has(pair), "mpirun got no {pair:?}: {argv:?}");
        }
    }

    /// `flavour`'s head script for `spec` run under bash against two pods (10.1.0.5 and
    /// 10.1.0.6, 8 GPUs each), with Google's init_ssh.sh and gen_hostfiles.sh and `extra`
    /// scripts in the scripts directory, and recording stand-ins of ssh and mpirun. Checks
    /// what both flavours share (every pod's host key accepted on port 222, a hostfile of
    /// both pods with 8 slots) and gives mpirun's arguments and the hostfile's path.
    fn run_head_with_recorders(
        spec: &RunSpec,
        flavour: GpuDirect,
        extra: &[(&str, String)],
    ) -> (Vec<String>, String) {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let (scripts, bin, rec) = (
            tmp.path().join("scripts"),
            tmp.path().join("bin"),
            tmp.path().join("rec"),
        );
        for d in [&scripts, &bin, &rec] {
            std::fs::create_dir(d).unwrap();
        }
        let exe = |p: &Path| std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        for f in ["init_ssh.sh", "gen_hostfiles.sh"] {
            std::fs::copy(tcpxo_script(f), scripts.join(f)).unwrap();
            exe(&scripts.join(f));
        }
        for (name, text) in extra {
            std::fs::write(scripts.join(name), text).unwrap();
            exe(&scripts.join(name));
        }
        for (name, body) in [
            ("ssh", "echo \"$*\" >> \"$REC/ssh\"\n"),
            (
                "mpirun",
                "printf '%s\\n' \"$@\" > \"$REC/mpirun\"\n\
                 while [ $# -gt 0 ]; do if [ \"$1\" = --hostfile ]; then cat \"$2\" > \"$REC/hostfile\"; fi; shift; done\n",
            ),
            ("tee", "exec cat\n"),
        ] {
            std::fs::write(bin.join(name), format!("#!/bin/bash\n{body}")).unwrap();
            exe(&bin.join(name));
        }
        let head = tmp.path().join("head.sh");
        let hosts = ["10.1.0.5".to_string(), "10.1.0.6".to_string()];
        std::fs::write(&head, head_script(spec, flavour, &hosts, 8)).unwrap();
        let out = std::process::Command::new("bash")
            .arg(&head)
            .current_dir(tmp.path())
            .env(
                "PATH",
                format!("{}:{}:/usr/bin:/bin", scripts.display(), bin.display()),
            )
            .env("REC", &rec)
            // As the test pod's container sets it.
            .env("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let read = |f: &str| {
            std::fs::read_to_string(rec.join(f))
                .unwrap_or_else(|_| panic!("{f} not run or no hostfile: {err}"))
        };
        assert_eq!(
            read("ssh"),
            "-o StrictHostKeyChecking=no -p 222 10.1.0.5 echo Hello from 10.1.0.5\n\
             -o StrictHostKeyChecking=no -p 222 10.1.0.6 echo Hello from 10.1.0.6\n"
        );
        assert_eq!(
            read("hostfile"),
            "10.1.0.5 port=222 slots=8\n10.1.0.6 port=222 slots=8\n"
        );
        let argv = read("mpirun").lines().map(String::from).collect();
        (argv, scripts.join("hostfiles2/hostfile8").display().to_string())
    }

    /// The TCPX guide's `run-nccl.sh`, as its ConfigMap
    /// (tests/fixtures/reference/container-engine-accelerators/gpudirect-tcpx/nccl-config.yaml)
    /// carries it.
    fn tcpx_run_nccl() -> String {
        let text =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(
                "tests/fixtures/reference/container-engine-accelerators/gpudirect-tcpx/nccl-config.yaml",
            ))
            .unwrap();
        let v: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        v["data"]["run-nccl.sh"].as_str().unwrap().to_string()
    }

    /// The TCPX head script under bash against the guide's own run-nccl.sh (from its
    /// ConfigMap), with Google's init_ssh.sh and gen_hostfiles.sh (the TCPXO repository's
    /// copies, standing in for the TCPX image's scripts of the same names and use) and
    /// recording stand-ins of ssh and mpirun: as the guide's allgather.sh, every pod's host
    /// key is accepted and mpirun finds the hostfile naming both pods with 8 slots.
    #[test]
    fn tcpx_head_script_writes_the_hostfiles_run_nccl_reads() {
        let spec = RunSpec {
            profile: GpuDirect::Tcpx,
            ..spec()
        };
        let (argv, hostfile) = run_head_with_recorders(
            &spec,
            GpuDirect::Tcpx,
            &[
                ("run-nccl.sh", tcpx_run_nccl()),
                // Sourced by run-nccl.sh: it picks the RxDM socket directory.
                ("unix_client_prefix_selection.sh", String::new()),
            ],
        );
        let has = |pair: &[&str]| argv.windows(pair.len()).any(|w| w == pair);
        for pair in [
            &["-np", "16"][..],
            &["--hostfile", &hostfile],
            &[
                "-x",
                "LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib64",
            ],
            &["-x", "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1,eth2,eth3,eth4"],
            &[
                "/third_party/nccl-tests-mpi/build/all_gather_perf",
                "-b",
                "1024",
                "-e",
                "8589934592",
            ],
        ] {
            assert!(has(pair), "mpirun got no {pair:?}: {argv:?}");
        }
    }

    /// A TCPX test pod starts the image's SSH daemon (init_ssh.sh and mpirun reach the
    /// pods on port 222), and mounts from the host only what GKE's TCPX manifests and
    /// installer provide: not /home/kubernetes/bin/tcpx, which the installer never makes
    /// (it copies the plugin into /home/kubernetes/bin/nvidia/lib64).
    #[test]
    fn tcpx_pods_run_sshd_and_mount_only_what_the_installer_makes() {
        let node = KubeNode::for_tests("gke-a3h-1");
        let x = serde_json::to_value(test_pod("a3h", "ag-1", 0, &node, GpuDirect::Tcpx, 8, None).unwrap())
            .unwrap();
        assert!(x["spec"]["containers"][0]["args"][0]
            .as_str()
            .unwrap()
            .starts_with("service ssh restart;"));
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/reference/container-engine-accelerators/gpudirect-tcpx");
        let mut named = vec![];
        for f in std::fs::read_dir(&root).unwrap() {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let v: serde_yaml::Value = serde::Deserialize::deserialize(doc).unwrap();
                for vol in v["spec"]["volumes"].as_sequence().into_iter().flatten() {
                    if let Some(p) = vol["hostPath"]["path"].as_str() {
                        named.push(p.to_string());
                    }
                }
            }
        }
        assert!(named.iter().any(|p| p == "/home/kubernetes/bin/nvidia/lib64"));
        for vol in x["spec"]["volumes"].as_array().unwrap() {
            let Some(p) = vol["hostPath"]["path"].as_str() else {
                continue;
            };
            assert!(
                named.iter().any(|n| n == p || n.starts_with(&format!("{p}/"))),
                "TCPX pods mount {p} from the host, which no TCPX manifest names"
            );
        }
    }

    #[test]
    fn tcpx_says_which_iterations_its_script_ignores() {
        let mut sp = spec();
        sp.iters = 20;
        sp.warmup = 5;
        assert_eq!(script_ignores(&sp, GpuDirect::Tcpx), None);
        sp.iters = 7;
        sp.warmup = 3;
        let n = script_ignores(&sp, GpuDirect::Tcpx).unwrap();
        assert!(
            n.contains("5 warm-up and 20 timed") && n.contains("-n 7 -w 3"),
            "{n}"
        );
        assert_eq!(script_ignores(&sp, GpuDirect::Tcpxo), None);
    }

    #[test]
    fn tcpxo_runs_only_what_the_image_script_takes() {
        let ok = tcpxo_spec();
        assert_eq!(script_takes(&ok, GpuDirect::Tcpxo, 8), Ok(()));
        let f3 = RunSpec {
            step_factor: 3,
            ..tcpxo_spec()
        };
        assert!(script_takes(&f3, GpuDirect::Tcpxo, 8)
            .unwrap_err()
            .contains("steps sizes by 2, not 3"));
        assert_eq!(script_takes(&f3, GpuDirect::Rdma, 8), Ok(()));
        assert!(script_takes(&ok, GpuDirect::Tcpxo, 3)
            .unwrap_err()
            .contains("not 3"));
        let half = RunSpec {
            dtype: "half".into(),
            ..tcpxo_spec()
        };
        assert!(script_takes(&half, GpuDirect::Tcpxo, 8)
            .unwrap_err()
            .contains("float only"));
    }

    #[test]
    fn tcpxo_pods_start_the_images_ssh_daemon() {
        let node = KubeNode::for_tests("gke-a3m-1");
        let x = serde_json::to_value(test_pod("a3m", "ag-1", 0, &node, GpuDirect::Tcpxo, 8, None).unwrap())
            .unwrap();
        assert!(x["spec"]["containers"][0]["args"][0]
            .as_str()
            .unwrap()
            .starts_with("service ssh restart;"));
    }

    /// Every reference manifest with a /dev/shm gives it a memory volume named
    /// `shared-memory` (gpudirect-rdma 250Gi, gpudirect-tcpxo 1Gi); without one NCCL's
    /// shared-memory transport gets the runtime's 64 MiB.
    #[test]
    fn test_pods_mount_memory_at_dev_shm() {
        let node = KubeNode::for_tests("gke-a3-1");
        for (flavour, size) in [
            (GpuDirect::Rdma, Some("250Gi")),
            (GpuDirect::Tcpxo, Some("1Gi")),
            (GpuDirect::Tcpx, None),
            (GpuDirect::None, None),
        ] {
            let v =
                serde_json::to_value(test_pod("a3", "ag-1", 0, &node, flavour, 8, None).unwrap()).unwrap();
            let mount = v["spec"]["containers"][0]["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["mountPath"] == "/dev/shm")
                .unwrap_or_else(|| panic!("{flavour:?}: nothing at /dev/shm"))
                .clone();
            assert_eq!(mount["name"], "shared-memory");
            let vol = v["spec"]["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == "shared-memory")
                .unwrap()
                .clone();
            assert_eq!(vol["emptyDir"]["medium"], "Memory", "{flavour:?}");
            assert_eq!(vol["emptyDir"]["sizeLimit"].as_str(), size, "{flavour:?}");
        }
    }

    /// The paths every `devices.gke.io/container.*` annotation of the pods in the
    /// reference manifests of `dir` (tests/fixtures/reference/container-engine-accelerators)
    /// lists, one list per annotation.
    fn manifest_devices(dir: &str) -> Vec<Vec<String>> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/reference/container-engine-accelerators")
            .join(dir);
        let mut lists = vec![];
        for f in std::fs::read_dir(&root).unwrap() {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let v: serde_yaml::Value = serde::Deserialize::deserialize(doc).unwrap();
                let Some(a) = v["metadata"]["annotations"].as_mapping() else {
                    continue;
                };
                for (k, list) in a {
                    if !k.as_str().unwrap().starts_with("devices.gke.io/container.") {
                        continue;
                    }
                    let list: Vec<serde_yaml::Value> = serde_yaml::from_str(list.as_str().unwrap()).unwrap();
                    lists.push(
                        list.iter()
                            .map(|d| d["path"].as_str().unwrap().to_string())
                            .collect(),
                    );
                }
            }
        }
        lists
    }

    /// The paths a test pod's RxDM devices annotation lists.
    fn pod_devices(flavour: GpuDirect) -> Vec<String> {
        let node = KubeNode::for_tests("gke-a3-1");
        let v = serde_json::to_value(test_pod("a3", "ag-1", 0, &node, flavour, 8, None).unwrap()).unwrap();
        let daemon = v["spec"]["initContainers"][0]["name"]
            .as_str()
            .unwrap()
            .to_string();
        let list = v["metadata"]["annotations"][format!("devices.gke.io/container.{daemon}")]
            .as_str()
            .unwrap_or_else(|| panic!("{flavour:?}: no devices annotation for {daemon}"));
        let list: Vec<serde_yaml::Value> = serde_yaml::from_str(list).unwrap();
        list.iter()
            .map(|d| d["path"].as_str().unwrap().to_string())
            .collect()
    }

    /// GKE's device injector fails a container whose listed device the node lacks: a TCPX
    /// (A3 High) pod lists only what GKE's TCPX manifests list (no dmabuf import helper),
    /// a TCPXO (A3 Mega) pod what GKE's TCPXO manifest lists.
    #[test]
    fn rxdm_devices_are_the_manifests_of_the_flavour() {
        let tcpx = manifest_devices("gpudirect-tcpx");
        assert!(!tcpx.is_empty());
        let named: std::collections::BTreeSet<&String> = tcpx.iter().flatten().collect();
        for d in pod_devices(GpuDirect::Tcpx) {
            assert!(
                named.contains(&d),
                "TCPX pods list {d}, which no TCPX manifest names"
            );
        }
        let tcpxo = manifest_devices("gpudirect-tcpxo");
        assert!(!tcpxo.is_empty());
        for list in &tcpxo {
            assert_eq!(&pod_devices(GpuDirect::Tcpxo), list);
        }
        assert!(tcpxo[0].iter().any(|d| d == "/dev/dmabuf_import_helper"));
    }
}
