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
use crate::cloud::gke::nccl::{
    delete_run_pods, machine, pod_name, recipe, rxdm_parts, shared_memory, RUN_LABEL,
};
use crate::cloud::gke::{self, object_name, Clients, KubeNode, FLEET_LABEL, MANAGED_BY, ROLE_LABEL};
use crate::fleet::NodeTarget;
use crate::reach::Reach;
use crate::ssh::client::BoxFuture;
use crate::store::RunRecord;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// The test pods' container.
pub const CONTAINER: &str = "nccl";
/// How long test pods may take to run (a multi-GB image pull).
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
            match delete_run_pods(reach.kube(), k, id).await {
                Ok(n) => Ok(Some(format!("removed {}", crate::words::plural(n, "test pod")))),
                Err(e) => Err(format!(
                    "the run's test pods were not removed ({e}); `flightdeck fleet delete` or `fleet gc` removes them"
                )),
            }
        })
    }
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
                "resources": {"limits": {gke::GPU_RESOURCE: gpus.to_string()}},
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
                gke::cluster::why(&e)
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
        let p = api.get(name).await.map_err(|e| gke::cluster::why(&e))?;
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

/// Start an nccl-tests run on the GKE nodes of `s`: the test pods, the head's script
/// (detached in the head pod, as a VM run's is on its head node), the record in the
/// state store and the history entry. Pods need no pre-flight and no node-to-node SSH
/// (the image brings its own): `s.preflight`, `s.node_ssh` and `s.mpirun` are the node
/// launcher's.
pub async fn start(state_dir: &Path, s: &Start, progress: Progress<'_>) -> Result<Started, String> {
    let (fleet, nodes, spec) = (s.fleet.as_str(), s.nodes.as_slice(), &s.spec);
    let clients = s.reach.kube();
    spec.check().map_err(|e| e.to_string())?;
    let first = nodes
        .first()
        .and_then(|n| n.kube().cloned())
        .ok_or("no GKE nodes selected")?;
    let (machine_type, node_gpus) = machine(clients, &first).await?;
    let gpus = spec.gpus.map(u64::from).unwrap_or(node_gpus).max(1) as u32;
    let machine = s
        .machine
        .clone()
        .or_else(|| machine_type.map(|m| (m, "the node's GKE label".to_string())));
    let id = runner::new_id(&spec.collective, crate::store::now_unix());
    let (pods, ips) = create_pods(clients, fleet, &id, nodes, spec.profile, gpus, progress).await?;
    let script = head_script(spec, spec.profile, &ips, gpus);
    let (command, input) = runner::launch_command(&id, &script, false);
    let head = pods[0].clone();
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
        let _ = delete_run_pods(clients, &first, &id).await;
        return Err(format!(
            "the run could not start in {}: {} {}",
            pod_name(&id, 0),
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
        "run {id} started in {} on {}",
        pod_name(&id, 0),
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
            let v = serde_json::to_value(test_pod("a3", "ag-1", 0, &node, flavour, 8)).unwrap();
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
        let v = serde_json::to_value(test_pod("a3", "ag-1", 0, &node, flavour, 8)).unwrap();
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
