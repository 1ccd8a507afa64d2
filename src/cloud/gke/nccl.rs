//! nccl-tests on GKE, as Google's GKE GPUDirect guides run them: one test pod per node
//! (the flavour's image, its network annotations and GPUs), then the image's own run
//! script on the first pod, naming every pod; its nccl-tests output is followed and
//! judged like a VM run's (same parser, chart, verdict and history), and the pods are
//! removed afterwards.
//!
//! Per flavour (GKE docs "Maximize GPU network bandwidth", gpudirect-tcpx/-tcpxo/-rdma):
//! * RDMA (A3 Ultra, A4; gIB): `nccl-plugin-gib-diagnostic`, the RDMA networks as
//!   `networking.gke.io/interfaces`, `/usr/local/gib/scripts/run_nccl_tests.sh -t
//!   all_gather -b 1K -e 8G HOST...`.
//! * TCPXO (A3 Mega): `nccl-plugin-gpudirecttcpx-dev` with host networking,
//!   `/scripts/demo-run-nccl-test-tcpxo-via-mpi.sh` (BENCHMARK, NHOSTS).
//! * TCPX (A3 High): `nccl-plugin-gpudirecttcpx-dev` v3 with host networking,
//!   `/scripts/allgather.sh HOST...`-style runs through `/scripts/run-nccl.sh`.
//!
//! The images' scripts set their flavour's NCCL environment themselves; flightdeck adds
//! only environment lines the operator edited.

use super::exec::{pod_phase, wait_running};
use super::{object_name, Clients, KubeNode, FLEET_LABEL, MANAGED_BY, ROLE_LABEL};
use crate::fleet::NodeTarget;
use crate::nccl::runner::RunSpec;
use crate::nccl::GpuDirect;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use std::fmt::Write as _;
use std::time::Duration;

/// The test pods' container.
pub const CONTAINER: &str = "nccl";
/// The label naming the run a test pod belongs to.
pub const RUN_LABEL: &str = "flightdeck-run";
/// How long test pods may take to run (a multi-GB image pull).
const POD_START: Duration = Duration::from_secs(600);

/// What the GKE guides give each flavour.
#[derive(Debug, Clone, PartialEq)]
pub struct Recipe {
    pub image: &'static str,
    pub host_network: bool,
    /// `networking.gke.io/interfaces` (multi-network pods), when the flavour uses it.
    pub interfaces: Option<&'static str>,
    /// Host paths mounted into the pod: (host, container).
    pub mounts: &'static [(&'static str, &'static str)],
    /// The receive-datapath manager the TCPX/TCPXO guides run beside NCCL.
    pub rxdm: Option<Rxdm>,
}

/// The RxDM sidecar of a TCPX/TCPXO pod (run as a native sidecar, an init container
/// that keeps running, so a job's pod still completes when its main container does).
#[derive(Debug, Clone, PartialEq)]
pub struct Rxdm {
    pub name: &'static str,
    pub image: &'static str,
    pub command: &'static str,
}

/// The GPU devices a TCPX/TCPXO daemon gets (`devices.gke.io/container.NAME`).
const RXDM_DEVICES: &str = "- path: /dev/nvidia0\n- path: /dev/nvidia1\n- path: /dev/nvidia2\n- path: /dev/nvidia3\n- path: /dev/nvidia4\n- path: /dev/nvidia5\n- path: /dev/nvidia6\n- path: /dev/nvidia7\n- path: /dev/nvidiactl\n- path: /dev/nvidia-uvm\n- path: /dev/dmabuf_import_helper\n";

const TCPXO_INTERFACES: &str = r#"[{"interfaceName":"eth0","network":"default"},{"interfaceName":"eth1","network":"vpc1"},{"interfaceName":"eth2","network":"vpc2"},{"interfaceName":"eth3","network":"vpc3"},{"interfaceName":"eth4","network":"vpc4"},{"interfaceName":"eth5","network":"vpc5"},{"interfaceName":"eth6","network":"vpc6"},{"interfaceName":"eth7","network":"vpc7"},{"interfaceName":"eth8","network":"vpc8"}]"#;
const TCPX_INTERFACES: &str = r#"[{"interfaceName":"eth0","network":"default"},{"interfaceName":"eth1","network":"vpc1"},{"interfaceName":"eth2","network":"vpc2"},{"interfaceName":"eth3","network":"vpc3"},{"interfaceName":"eth4","network":"vpc4"}]"#;

const RDMA_INTERFACES: &str = r#"[{"interfaceName":"eth0","network":"default"},{"interfaceName":"eth1","network":"gvnic-1"},{"interfaceName":"eth2","network":"rdma-0"},{"interfaceName":"eth3","network":"rdma-1"},{"interfaceName":"eth4","network":"rdma-2"},{"interfaceName":"eth5","network":"rdma-3"},{"interfaceName":"eth6","network":"rdma-4"},{"interfaceName":"eth7","network":"rdma-5"},{"interfaceName":"eth8","network":"rdma-6"},{"interfaceName":"eth9","network":"rdma-7"}]"#;

pub fn recipe(flavour: GpuDirect) -> Recipe {
    match flavour {
        GpuDirect::Rdma => Recipe {
            image: "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-diagnostic:v1.0.6",
            host_network: false,
            interfaces: Some(RDMA_INTERFACES),
            mounts: &[
                ("/home/kubernetes/bin/nvidia", "/usr/local/nvidia"),
                ("/home/kubernetes/bin/gib", "/usr/local/gib"),
            ],
            rxdm: None,
        },
        GpuDirect::Tcpxo => Recipe {
            image: "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.8-1",
            host_network: false,
            interfaces: Some(TCPXO_INTERFACES),
            mounts: &[("/home/kubernetes/bin/nvidia", "/usr/local/nvidia")],
            rxdm: Some(Rxdm {
                name: "tcpxo-daemon",
                image: "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.14",
                command: "set -ex; chmod 755 /fts/entrypoint_rxdm_container.sh; /fts/entrypoint_rxdm_container.sh --num_hops=2 --num_nics=8 --uid= --alsologtostderr",
            }),
        },
        GpuDirect::Tcpx => Recipe {
            image: "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9",
            host_network: false,
            interfaces: Some(TCPX_INTERFACES),
            mounts: &[
                ("/home/kubernetes/bin/nvidia", "/usr/local/nvidia"),
                ("/home/kubernetes/bin/tcpx", "/usr/local/tcpx"),
            ],
            rxdm: Some(Rxdm {
                name: "tcpx-daemon",
                image: "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12",
                command: "/tcpgpudmarxd/build/app/tcpgpudmarxd --gpu_nic_preset a3vm --gpu_shmem_type fd --uds_path /run/tcpx --setup_param \"--verbose 128 2 0\"",
            }),
        },
        // No GPUDirect: the gIB diagnostic image still carries nccl-tests and mpirun.
        GpuDirect::None => Recipe {
            image: "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-diagnostic:v1.0.6",
            host_network: true,
            interfaces: None,
            mounts: &[("/home/kubernetes/bin/nvidia", "/usr/local/nvidia")],
            rxdm: None,
        },
    }
}

/// The RxDM sidecar as a native sidecar (an init container with `restartPolicy:
/// Always`), its devices annotation, and the volumes it needs (the node's /sys and
/// /proc/sys, the driver).
pub fn rxdm_parts(r: &Recipe) -> Option<(serde_json::Value, (String, String), Vec<serde_json::Value>)> {
    let x = r.rxdm.as_ref()?;
    let sidecar = serde_json::json!({
        "name": x.name,
        "image": x.image,
        "restartPolicy": "Always",
        "command": ["/bin/sh", "-c", x.command],
        "securityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}},
        "env": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}],
        "volumeMounts": [
            {"name": "rxdm-nvidia", "mountPath": "/usr/local/nvidia"},
            {"name": "rxdm-sys", "mountPath": "/hostsysfs"},
            {"name": "rxdm-proc-sys", "mountPath": "/hostprocsysfs"},
            {"name": "rxdm-uds", "mountPath": "/run/tcpx"},
        ],
    });
    let volumes = vec![
        serde_json::json!({"name": "rxdm-nvidia", "hostPath": {"path": "/home/kubernetes/bin/nvidia"}}),
        serde_json::json!({"name": "rxdm-sys", "hostPath": {"path": "/sys"}}),
        serde_json::json!({"name": "rxdm-proc-sys", "hostPath": {"path": "/proc/sys"}}),
        serde_json::json!({"name": "rxdm-uds", "emptyDir": {}}),
    ];
    Some((
        sidecar,
        (
            format!("devices.gke.io/container.{}", x.name),
            RXDM_DEVICES.to_string(),
        ),
        volumes,
    ))
}

/// A test pod's name.
pub fn pod_name(run: &str, rank: usize) -> String {
    object_name(&format!("fd-nccl-{run}-{rank}"), 63)
}

/// Test pod `rank` of run `run` on `node`: it starts the image's SSH daemon (the run
/// script reaches the other pods through it, as mpirun does) and waits.
pub fn test_pod(fleet: &str, run: &str, rank: usize, node: &KubeNode, flavour: GpuDirect, gpus: u32) -> Pod {
    let r = recipe(flavour);
    let mut annotations = serde_json::Map::new();
    if let Some(i) = r.interfaces {
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
    let mut init = vec![];
    if let Some((sidecar, (key, devices), vols)) = rxdm_parts(&r) {
        annotations.insert(key, devices.into());
        init.push(sidecar);
        volumes.extend(vols);
        // NCCL's plugin talks to the daemon over its socket directory.
        mounts.push(serde_json::json!({"name": "rxdm-uds", "mountPath": "/run/tcpx"}));
    }
    let v = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(run, rank),
            "namespace": node.namespace,
            "labels": {
                MANAGED_BY.0: MANAGED_BY.1,
                FLEET_LABEL: fleet,
                ROLE_LABEL: "nccl",
                RUN_LABEL: object_name(run, 63),
            },
            "annotations": annotations,
        },
        "spec": {
            "nodeName": node.node,
            "hostNetwork": r.host_network,
            "dnsPolicy": if r.host_network { "ClusterFirstWithHostNet" } else { "ClusterFirst" },
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "tolerations": [{"operator": "Exists"}],
            "volumes": volumes,
            "initContainers": init,
            "containers": [{
                "name": CONTAINER,
                "image": r.image,
                "securityContext": {"privileged": true},
                "env": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}],
                "command": ["/bin/bash", "-c"],
                "args": ["if [ -x /scripts/container_entry.sh ]; then /scripts/container_entry.sh daemon & fi; exec sleep infinity"],
                "resources": {"limits": {super::GPU_RESOURCE: gpus.to_string()}},
                "volumeMounts": mounts,
            }],
        },
    });
    serde_json::from_value(v).expect("a test pod is a Pod")
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
        GpuDirect::Tcpxo => {
            let _ = writeln!(
                s,
                "{}",
                crate::shellenv::export("PATH", crate::shellenv::Value::Prepend("/scripts"))
            );
            let _ = writeln!(
                s,
                "BENCHMARK={test}_perf NHOSTS={n} NCCL_LIB_DIR=\"${{LD_LIBRARY_PATH:-}}\" LD_LIBRARY_PATH=\"${{LD_LIBRARY_PATH:-}}\" \
                 MIN_BYTES={b} MAX_BYTES={e} FACTOR={f} GPUS_PER_NODE={gpus} HOSTS=\"{list}\" exec demo-run-nccl-test-tcpxo-via-mpi.sh",
                n = hosts.len(),
                b = spec.min_bytes,
                e = spec.max_bytes,
                f = spec.step_factor
            );
        }
        GpuDirect::Tcpx => {
            let _ = writeln!(
                s,
                "{}",
                crate::shellenv::export("PATH", crate::shellenv::Value::Prepend("/scripts"))
            );
            let _ = writeln!(
                s,
                "exec run-nccl.sh {test}_perf \"${{LD_LIBRARY_PATH:-}}\" {gpus} eth1,eth2,eth3,eth4 {b} {e} {n} {list}",
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

/// Create the run's test pods on `nodes` and wait until they all run; the pods as nodes
/// (head first) and the machine type GKE labels the first node with.
pub async fn create_pods(
    clients: &Clients,
    fleet: &str,
    run: &str,
    nodes: &[NodeTarget],
    flavour: GpuDirect,
    gpus: u32,
    progress: &(dyn Fn(String) + Sync),
) -> Result<(Vec<NodeTarget>, Vec<String>), String> {
    let first = nodes
        .first()
        .and_then(|n| n.kube().cloned())
        .ok_or("not a GKE fleet's nodes")?;
    let client = clients.get(&first.cluster).await?;
    let api: Api<Pod> = Api::namespaced(client, &first.namespace);
    progress(format!(
        "creating {} ({}) for run {run}",
        crate::words::plural(nodes.len(), "test pod"),
        recipe(flavour).image
    ));
    let mut made = vec![];
    for (rank, n) in nodes.iter().enumerate() {
        let k = n.kube().ok_or_else(|| format!("{}: not a GKE node", n.name))?;
        let pod = test_pod(fleet, run, rank, k, flavour, gpus);
        if let Err(e) = api.create(&PostParams::default(), &pod).await {
            let _ = delete_run_pods(clients, &first, run).await;
            return Err(format!(
                "creating test pod {}: {}",
                pod_name(run, rank),
                super::cluster::why(&e)
            ));
        }
        made.push(pod_name(run, rank));
    }
    let mut ips = vec![];
    for name in &made {
        if let Err(e) = wait_running(&api, name, POD_START).await {
            let _ = delete_run_pods(clients, &first, run).await;
            return Err(e);
        }
        let p = api.get(name).await.map_err(|e| super::cluster::why(&e))?;
        let ip = p
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .ok_or_else(|| format!("pod {name} runs without an address ({})", pod_phase(&p).0))?;
        ips.push(ip);
    }
    progress(format!("test pods running: {}", ips.join(" ")));
    let pods = nodes
        .iter()
        .zip(&made)
        .map(|(n, name)| {
            let mut t = n.clone();
            if let Some(k) = t.kube_mut() {
                k.pod = Some(name.clone());
                k.container = Some(CONTAINER.into());
            }
            t
        })
        .collect();
    Ok((pods, ips))
}

/// Remove run `run`'s test pods; how many there were.
pub async fn delete_run_pods(clients: &Clients, node: &KubeNode, run: &str) -> Result<usize, String> {
    let client = clients.get(&node.cluster).await?;
    let api: Api<Pod> = Api::namespaced(client, &node.namespace);
    let list = api
        .list(&ListParams::default().labels(&format!("{RUN_LABEL}={}", object_name(run, 63))))
        .await
        .map_err(|e| super::cluster::why(&e))?;
    let n = list.items.len();
    for p in list.items {
        if let Some(name) = p.metadata.name {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if super::cluster::not_found(&e) => {}
                Err(e) => return Err(format!("deleting {name}: {}", super::cluster::why(&e))),
            }
        }
    }
    Ok(n)
}

/// The machine type GKE labels the node with (`node.kubernetes.io/instance-type`) and
/// the GPUs it offers.
pub async fn machine(clients: &Clients, node: &KubeNode) -> Result<(Option<String>, u64), String> {
    let client = clients.get(&node.cluster).await?;
    let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client);
    let n = api
        .get(&node.node)
        .await
        .map_err(|e| format!("node {}: {}", node.node, super::cluster::why(&e)))?;
    let gpus = super::view::gpus_allocatable(&n);
    Ok((
        n.metadata
            .labels
            .and_then(|l| l.get(super::view::INSTANCE_TYPE_LABEL).cloned()),
        gpus,
    ))
}

/// A started run on GKE: its id, its head pod as a node, and its history entry.
pub struct Started {
    pub id: String,
    pub head: NodeTarget,
    pub saved: crate::nccl::history::SavedRun,
}

/// Start an nccl-tests run on GKE nodes `nodes` of `fleet`: the test pods, the head's
/// script (detached in the head pod, as a VM run's is on its head node), the record in
/// the state store and the history entry.
#[allow(clippy::too_many_arguments)]
pub async fn start(
    state_dir: &std::path::Path,
    clients: &Clients,
    reach: crate::reach::Reach,
    fleet: &str,
    nodes: &[NodeTarget],
    spec: &RunSpec,
    machine_given: Option<(String, String)>,
    progress: &(dyn Fn(String) + Sync),
) -> Result<Started, String> {
    use crate::nccl::{history, remote, runner};
    spec.check().map_err(|e| e.to_string())?;
    let first = nodes
        .first()
        .and_then(|n| n.kube().cloned())
        .ok_or("no GKE nodes selected")?;
    let (machine_type, node_gpus) = machine(clients, &first).await?;
    let gpus = spec.gpus.map(u64::from).unwrap_or(node_gpus).max(1) as u32;
    let machine = machine_given.or_else(|| machine_type.map(|m| (m, "the node's GKE label".to_string())));
    let id = runner::new_id(&spec.collective, crate::store::now_unix());
    let (pods, ips) = create_pods(clients, fleet, &id, nodes, spec.profile, gpus, progress).await?;
    let script = head_script(spec, spec.profile, &ips, gpus);
    let (command, input) = runner::launch_command(&id, &script, false);
    let head = pods[0].clone();
    let out = crate::exec::collect_with_input(reach, vec![(head.clone(), command, input)]).await;
    let (code, stdout, stderr) = out
        .into_iter()
        .next()
        .unwrap_or((-1, String::new(), String::new()));
    let pid = stdout
        .trim()
        .strip_prefix("started ")
        .and_then(|p| p.parse().ok());
    if code != 0 || pid.is_none() {
        let _ = delete_run_pods(clients, &first, &id).await;
        return Err(format!(
            "the run could not start in {}: {} {}",
            pod_name(&id, 0),
            stdout.trim(),
            stderr.trim()
        ));
    }
    let saved = remote::saved_run(
        &id,
        fleet,
        spec,
        &pods,
        machine.as_ref().map(|(m, f)| (m.clone(), f.as_str())),
        None,
    );
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
        "run {id} started in {} on {}",
        pod_name(&id, 0),
        crate::words::plural(nodes.len(), "node")
    ));
    Ok(Started { id, head, saved })
}

#[cfg(test)]
mod tests {
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
        let v = serde_json::to_value(test_pod("a3u", "ag-1", 0, &node, GpuDirect::Rdma, 8)).unwrap();
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
        let x = serde_json::to_value(test_pod("a3m", "ag-1", 1, &node, GpuDirect::Tcpxo, 8)).unwrap();
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
}
